// Each elementwise/row GPU kernel against its CPU reference on random inputs,
// in F32, BF16 and F16 storage.
#include <gtest/gtest.h>

#include <vector>

#include "backend.h"
#include "gpu_test_util.h"
#include "hipformers/core/error.h"
#include "hipformers/kernels/activation.h"
#include "hipformers/kernels/embedding.h"
#include "hipformers/kernels/linear.h"
#include "hipformers/kernels/rms_norm.h"
#include "hipformers/kernels/rotary.h"

namespace hipformers::testing {
namespace {

namespace k = hipformers::kernels;

class GpuOpsTest : public RandomTest {};

constexpr DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};

TEST_F(GpuOpsTest, EmbeddingCopiesRowsExactly) {
  for (DType dt : kDtypes)
    for (int64_t hidden : {64, 67, 1024}) {
      const int64_t vocab = 97;
      Tensor w = rounded(random({vocab, hidden}), dt);
      std::vector<int32_t> ids;
      for (int i = 0; i < 13; ++i) ids.push_back(static_cast<int32_t>(rng_() % vocab));
      ids.push_back(ids[0]);  // a repeated id
      Tensor expected = Tensor::empty({static_cast<int64_t>(ids.size()), hidden}, DType::kF32);
      k::embedding(w, ids, expected);
      Tensor out = poisoned({static_cast<int64_t>(ids.size()), hidden}, dt);
      k::embedding(to_gpu(w, dt), ids, out);
      expect_close(out, expected, 0, 0, std::string("embedding ") + name(dt));
    }
}

TEST_F(GpuOpsTest, RmsNormMatchesCpuWithAndWithoutResidual) {
  for (DType dt : kDtypes)
    for (int64_t rows : {1, 7, 33})
      for (int64_t H : {64, 128, 1000, 1024, 4096, 8192}) {
        const std::string what = std::string("rms_norm ") + name(dt) + " rows " + std::to_string(rows) + " H " +
                                 std::to_string(H);
        Tensor x = rounded(random({rows, H}, 2.0f), dt), w = rounded(random({H}), dt);
        Tensor expected = Tensor::empty({rows, H}, DType::kF32), rstd = Tensor::empty({rows}, DType::kF32);
        k::rms_norm(x, w, 1e-6, dt, expected, &rstd);
        Tensor out = poisoned({rows, H}, dt), g_rstd = poisoned({rows}, DType::kF32);
        k::rms_norm(to_gpu(x, dt), to_gpu(w, dt), 1e-6, dt, out, &g_rstd);
        const Tolerance tol = tolerance(dt);
        expect_close(out, expected, tol.atol, tol.rtol, what);
        expect_close(g_rstd, rstd, 0, 1e-4f, what + " rstd");

        // Fused residual add: residual updated in place, norm of the sum.
        Tensor a = rounded(random({rows, H}), dt);
        Tensor residual = x.clone(), expected2 = Tensor::empty({rows, H}, DType::kF32);
        k::add_rms_norm(a, residual, w, 1e-6, dt, expected2);
        Tensor g_residual = to_gpu(x, dt), out2 = poisoned({rows, H}, dt);
        k::add_rms_norm(to_gpu(a, dt), g_residual, to_gpu(w, dt), 1e-6, dt, out2);
        expect_close(g_residual, residual, 0, 0, what + " residual");
        expect_close(out2, expected2, tol.atol, tol.rtol, what + " fused");
      }
}

TEST_F(GpuOpsTest, RopeMatchesCpuForEveryScaling) {
  std::vector<k::RopeSpec> specs;
  for (int64_t dim : {64, 128}) {
    k::RopeSpec s;
    s.head_dim = dim;
    s.theta = 1000000.0;
    s.max_position_embeddings = 4096;
    specs.push_back(s);
    k::RopeSpec l3 = s;
    l3.kind = k::RopeSpec::kLlama3;
    l3.factor = 8.0;
    l3.original_max_position_embeddings = 8192;
    specs.push_back(l3);
    k::RopeSpec yarn = s;
    yarn.kind = k::RopeSpec::kYarn;
    yarn.factor = 4.0;
    yarn.original_max_position_embeddings = 1024;
    yarn.yarn_attention_factor = 1.1;
    specs.push_back(yarn);
  }
  for (DType dt : kDtypes)
    for (const k::RopeSpec& spec : specs)
      for (int64_t heads : {1, 4, 7}) {
        const k::RopeFrequencies f = k::rope_frequencies(spec);
        const int64_t T = 11;
        std::vector<int64_t> pos;
        for (int64_t t = 0; t < T; ++t) pos.push_back(static_cast<int64_t>(rng_() % 5000));
        Tensor x = rounded(random({T, heads * spec.head_dim}), dt);
        Tensor expected = x.clone();
        k::apply_rope(expected, heads, pos, f, dt);
        Tensor g = to_gpu(x, dt);
        k::apply_rope(g, heads, pos, f, dt);
        const Tolerance tol = tolerance(dt);
        // fp32: cosf/sinf of angles up to ~5000 rad differ from libm by an ulp or two of the angle.
        expect_close(g, expected, dt == DType::kF32 ? 2e-5f : tol.atol, tol.rtol,
                     std::string("rope ") + name(dt) + " kind " + std::to_string(spec.kind) + " dim " +
                         std::to_string(spec.head_dim) + " heads " + std::to_string(heads));
      }
}

TEST_F(GpuOpsTest, SiluAndMulMatchesCpu) {
  for (DType dt : kDtypes)
    for (int64_t n : {1, 255, 4099}) {
      Tensor g = rounded(random({n}, 6.0f), dt), u = rounded(random({n}, 2.0f), dt);
      Tensor expected = Tensor::empty({n}, DType::kF32);
      k::silu_and_mul(g, u, dt, expected);
      Tensor out = poisoned({n}, dt);
      k::silu_and_mul(to_gpu(g, dt), to_gpu(u, dt), dt, out);
      const Tolerance tol = tolerance(dt);
      expect_close(out, expected, tol.atol, tol.rtol, std::string("silu_and_mul ") + name(dt));
    }
}

TEST_F(GpuOpsTest, LinearMatchesCpuThroughBlasAndTiledKernel) {
  struct Case {
    int64_t rows, in, out;
  };
  for (DType dt : kDtypes)
    for (Case c : {Case{1, 64, 96}, Case{3, 130, 257}, Case{17, 1024, 64}, Case{65, 128, 1000}})
      for (bool with_bias : {false, true}) {
        const std::string what = std::string("linear ") + name(dt) + " " + std::to_string(c.rows) + "x" +
                                 std::to_string(c.in) + "->" + std::to_string(c.out) + (with_bias ? " +bias" : "");
        Tensor x = rounded(random({c.rows, c.in}), dt), w = rounded(random({c.out, c.in}, 0.1f), dt);
        Tensor b = with_bias ? rounded(random({c.out}), dt) : Tensor();
        Tensor expected = Tensor::empty({c.rows, c.out}, DType::kF32);
        k::linear(x, w, b, dt, expected);
        Tensor gx = to_gpu(x, dt), gw = to_gpu(w, dt), gb = with_bias ? to_gpu(b, dt) : Tensor();
        // Accumulation order differs: scale the absolute bar with sqrt(in).
        const Tolerance tol = tolerance(dt, std::sqrt(static_cast<float>(c.in)) / 4);
        Tensor y = poisoned({c.rows, c.out}, dt);
        k::linear(gx, gw, gb, dt, y);
        expect_close(y, expected, tol.atol, tol.rtol, what);
        Tensor y2 = poisoned({c.rows, c.out}, dt);
        k::gpu::tiled_linear_for_test(gx, gw, gb, dt, y2);
        expect_close(y2, expected, tol.atol, tol.rtol, what + " (tiled)");
      }
}

TEST_F(GpuOpsTest, MixedDevicesAndDtypesAreRejected) {
  Tensor x = random({2, 64});
  Tensor w = to_gpu(random({64}), DType::kBF16);
  Tensor out = poisoned({2, 64}, DType::kBF16);
  EXPECT_THROW(k::rms_norm(x, w, 1e-6, DType::kBF16, out), Error);
  EXPECT_THROW(k::rms_norm(to_gpu(x, DType::kF32), w, 1e-6, DType::kBF16, out), Error);
}

}  // namespace
}  // namespace hipformers::testing
