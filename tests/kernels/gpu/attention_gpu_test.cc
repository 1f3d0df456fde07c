// The fused GPU attention (sdpa and eager) and KV-cache append against the CPU
// reference: GQA ratios 1/2/4/8, head_dim 64/128, odd prefill lengths, a
// decode step after the prefill, with and without a sliding window.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "gpu_test_util.h"
#include "hipformers/kernels/attention.h"

namespace hipformers::testing {
namespace {

namespace k = hipformers::kernels;

struct Caches {
  k::KVCacheView host, gpu;
};

Caches make_caches(int64_t kv_heads, int64_t capacity, int64_t dim, DType dt) {
  const Shape shape{kv_heads, capacity, dim};
  Caches c;
  c.host = {Tensor::zeros(shape, DType::kF32), Tensor::zeros(shape, DType::kF32), 0};
  c.gpu = {poisoned(shape, dt), poisoned(shape, dt), 0};
  return c;
}

class GpuAttentionTest : public RandomTest {
 protected:
  // One forward step of T tokens: append k/v to both caches, attend, compare.
  void step(Caches& c, const k::AttentionSpec& spec, int64_t T, const std::string& what);
};

void GpuAttentionTest::step(Caches& c, const k::AttentionSpec& spec, int64_t T, const std::string& what) {
  const DType dt = spec.dtype;
  const int64_t qw = spec.heads * spec.head_dim, kvw = spec.kv_heads * spec.head_dim;
  std::vector<int64_t> pos;
  for (int64_t t = 0; t < T; ++t) pos.push_back(c.host.length + t);
  Tensor q = rounded(random({T, qw}, 1.0f), dt);
  Tensor kk = rounded(random({T, kvw}, 1.0f), dt), vv = rounded(random({T, kvw}, 1.0f), dt);
  k::kv_cache_append(c.host, kk, vv);
  k::kv_cache_append(c.gpu, to_gpu(kk, dt), to_gpu(vv, dt));
  ASSERT_EQ(c.gpu.length, c.host.length);

  const int64_t S = c.host.length;
  Tensor expected = Tensor::empty({T, qw}, DType::kF32);
  Tensor probs = Tensor::empty({spec.heads, T, S}, DType::kF32);
  k::attention(q, pos, c.host, spec, expected, spec.eager ? &probs : nullptr);
  Tensor out = poisoned({T, qw}, dt);
  Tensor g_probs = poisoned({spec.heads, T, S}, DType::kF32);
  k::attention(to_gpu(q, dt), pos, c.gpu, spec, out, spec.eager ? &g_probs : nullptr);
  const Tolerance tol = tolerance(dt);
  expect_close(out, expected, tol.atol, tol.rtol, what);
  if (spec.eager) expect_close(g_probs, probs, tol.atol / 4, tol.rtol, what + " probs");
}

TEST_F(GpuAttentionTest, PrefillThenDecodeMatchesCpu) {
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int64_t dim : {64, 128})
      for (int64_t ratio : {1, 2, 4, 8})
        for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{5}})
          for (bool eager : {false, true}) {
            k::AttentionSpec spec;
            spec.heads = 8;
            spec.kv_heads = 8 / ratio;
            spec.head_dim = dim;
            spec.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
            spec.sliding_window = window;
            spec.dtype = dt;
            spec.eager = eager;
            const std::string what = std::string(eager ? "eager " : "sdpa ") + dtype_name(dt) + " dim " +
                                     std::to_string(dim) + " gqa " + std::to_string(ratio) +
                                     (window ? " window 5" : "");
            Caches c = make_caches(spec.kv_heads, 64, dim, dt);
            step(c, spec, 13, what + " prefill");
            step(c, spec, 1, what + " decode");
            step(c, spec, 3, what + " chunk");
          }
}

TEST_F(GpuAttentionTest, HeadDimLargerThanTheWarpAndOddLengths) {
  // head_dim 80 and 256: not a multiple of 64 / the kernel's largest case.
  for (int64_t dim : {80, 256}) {
    k::AttentionSpec spec;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.head_dim = dim;
    spec.scale = 0.1f;
    Caches c = make_caches(2, 200, dim, DType::kF32);
    step(c, spec, 157, "dim " + std::to_string(dim) + " long prefill");
    step(c, spec, 1, "dim " + std::to_string(dim) + " decode");
  }
}

}  // namespace
}  // namespace hipformers::testing
