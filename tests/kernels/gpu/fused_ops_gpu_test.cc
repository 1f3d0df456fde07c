// The fused decode ops and the small-batch linear paths on the GPU against
// their CPU references, in F32, BF16 and F16 storage: qkv_rope_write (also
// against the unfused GPU ops), silu_and_mul_packed, embedding by tensor ids,
// argmax_rows, linear through the GEMV kernel (rows 1..8) and the
// plan-cached cuBLASLt path (rows 9..300); plus a GEMV bandwidth print.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "gpu_test_util.h"
#include "hipformers/core/error.h"
#include "hipformers/kernels/activation.h"
#include "hipformers/kernels/embedding.h"
#include "hipformers/kernels/linear.h"
#include "hipformers/kernels/logits.h"
#include "hipformers/kernels/paged_attention.h"
#include "hipformers/kernels/qkv_rope.h"
#include "hipformers/kernels/rms_norm.h"
#include "hipformers/kernels/rotary.h"
#include "hipformers/runtime/profiling.h"

namespace hipformers::testing {
namespace {

namespace k = hipformers::kernels;

class GpuFusedOpsTest : public RandomTest {};

constexpr DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};

Tensor host_i32(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kI32);
  std::memcpy(t.mutable_data<int32_t>(), v.data(), v.size() * sizeof(int32_t));
  return t;
}
Tensor host_i32(const std::vector<int32_t>& v) { return host_i32(v, Shape{static_cast<int64_t>(v.size())}); }
Tensor gpu_i32(const std::vector<int32_t>& v) { return host_i32(v).to(test_gpu()); }

Tensor host_f32(const std::vector<float>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::kF32);
  std::memcpy(t.mutable_data<float>(), v.data(), v.size() * sizeof(float));
  return t;
}

Tensor columns(const Tensor& t, int64_t begin, int64_t width) {
  const int64_t rows = t.size(0), cols = t.size(1);
  Tensor out = Tensor::empty({rows, width}, DType::kF32);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.mutable_data<float>() + r * width, t.data<float>() + r * cols + begin,
                static_cast<std::size_t>(width) * sizeof(float));
  return out;
}

void expect_equal(const Tensor& gpu, const Tensor& gpu_or_host, const std::string& what) {
  Tensor a = to_host_f32(gpu);
  Tensor b = gpu_or_host.device().is_cpu() ? gpu_or_host : to_host_f32(gpu_or_host);
  ASSERT_EQ(a.numel(), b.numel()) << what;
  int64_t bad = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(a.data<float>() + i, b.data<float>() + i, sizeof(float)) != 0 && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << a.data<float>()[i] << ", expected "
                    << b.data<float>()[i];
  EXPECT_EQ(bad, 0) << what;
}

TEST_F(GpuFusedOpsTest, QkvRopeWriteMatchesCpuAndUnfusedGpuOps) {
  const std::vector<int32_t> seq_of = {0, 1, 1, 2, 2, 2, 3}, pos = {130, 5, 6, 63, 64, 200, 4095};
  const int64_t num_seqs = 4, max_pages = 64, num_pages = 8, T = static_cast<int64_t>(pos.size());
  std::vector<int32_t> pages(static_cast<std::size_t>(num_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng_);
  // Every token's page distinct (shuffled); the unused entries point at pages[7].
  std::vector<int32_t> table(static_cast<std::size_t>(num_seqs * max_pages), pages[7]);
  const std::pair<int64_t, int64_t> used[] = {{0, 2}, {1, 0}, {2, 0}, {2, 1}, {2, 3}, {3, 63}};  // (seq, page index)
  for (std::size_t i = 0; i < std::size(used); ++i)
    table[static_cast<std::size_t>(used[i].first * max_pages + used[i].second)] = pages[i];
  k::PagedBatch host_batch, batch;
  for (k::PagedBatch* b : {&host_batch, &batch}) {
    b->num_seqs = num_seqs;
    b->num_tokens = T;
    b->max_query_len = 3;
    b->max_seq_len = 4096;
  }
  host_batch.positions = host_i32(pos);
  host_batch.token_seq = host_i32(seq_of);
  host_batch.block_table = host_i32(table, Shape{num_seqs, max_pages});
  batch.positions = host_batch.positions.to(test_gpu());
  batch.token_seq = host_batch.token_seq.to(test_gpu());
  batch.block_table = host_batch.block_table.to(test_gpu());

  for (DType dt : kDtypes)
    for (int64_t D : {64, 128, 256})
      for (bool norm : {true, false})
        for (auto [heads, kv_heads] : {std::pair<int64_t, int64_t>{16, 8}, {7, 1}, {40, 8}}) {
          const std::string what = std::string("qkv_rope_write ") + name(dt) + " D " + std::to_string(D) +
                                   (norm ? " norm" : "") + " heads " + std::to_string(heads) + "/" +
                                   std::to_string(kv_heads);
          k::RopeSpec spec;
          spec.theta = 1000000.0;
          spec.head_dim = D;
          const k::RopeFrequencies freqs = k::rope_frequencies(spec);
          Tensor qkv = rounded(random({T, (heads + 2 * kv_heads) * D}, 3.0f), dt);
          Tensor q_norm = norm ? rounded(random({D}), dt) : Tensor();
          Tensor k_norm = norm ? rounded(random({D}), dt) : Tensor();
          Tensor pool_k = rounded(random({num_pages, kv_heads, k::kKVPageSize, D}), dt);
          Tensor pool_v = rounded(random({num_pages, kv_heads, k::kKVPageSize, D}), dt);

          k::PagedKVLayer want{pool_k.clone(), pool_v.clone()};
          Tensor want_q = Tensor::empty({T, heads * D}, DType::kF32);
          k::qkv_rope_write(qkv, q_norm, k_norm, 1e-6, host_f32(freqs.inv_freq), freqs.attention_scaling,
                            host_batch, heads, kv_heads, dt, want, want_q);

          k::PagedKVLayer got{to_gpu(pool_k, dt), to_gpu(pool_v, dt)};
          Tensor q_out = poisoned({T, heads * D}, dt);
          k::qkv_rope_write(to_gpu(qkv, dt), norm ? to_gpu(q_norm, dt) : Tensor(),
                            norm ? to_gpu(k_norm, dt) : Tensor(), 1e-6,
                            host_f32(freqs.inv_freq).to(test_gpu()), freqs.attention_scaling, batch, heads,
                            kv_heads, dt, got, q_out);
          const Tolerance tol = tolerance(dt, 4.0f);
          // fp32: cosf/sinf of angles up to ~4000 rad differ from libm by an ulp or two of the angle.
          expect_close(q_out, want_q, dt == DType::kF32 ? 1e-4f : tol.atol, tol.rtol, what + " q");
          expect_close(got.k, want.k, dt == DType::kF32 ? 1e-4f : tol.atol, tol.rtol, what + " k pool");
          expect_equal(got.v, want.v, what + " v pool");

          // The unfused GPU ops: per-head rms_norm, apply_rope, then the slot writes.
          std::vector<int64_t> pos64(pos.begin(), pos.end());
          Tensor q = to_gpu(columns(qkv, 0, heads * D), dt), kk = to_gpu(columns(qkv, heads * D, kv_heads * D), dt);
          if (norm) {
            Tensor qn = poisoned(q.shape(), dt), kn = poisoned(kk.shape(), dt);
            k::rms_norm(q.reshape({T * heads, D}), to_gpu(q_norm, dt), 1e-6, dt, qn);
            k::rms_norm(kk.reshape({T * kv_heads, D}), to_gpu(k_norm, dt), 1e-6, dt, kn);
            q = qn;
            kk = kn;
          }
          k::apply_rope(q, heads, pos64, freqs, dt);
          k::apply_rope(kk, kv_heads, pos64, freqs, dt);
          // Same kernels' arithmetic: identical bits in 16-bit storage; in F32
          // the compiler's fma contraction may differ between the two kernels.
          if (dt == DType::kF32) {
            expect_close(q_out, to_host_f32(q), 1e-6f, 1e-6f, what + " q vs unfused GPU");
          } else {
            expect_equal(q_out, q, what + " q vs unfused GPU");
          }
          Tensor got_k = to_host_f32(got.k), k_rows = to_host_f32(kk);
          for (int64_t t = 0; t < T; ++t) {
            const int64_t p = pos[static_cast<std::size_t>(t)];
            const int64_t page = table[static_cast<std::size_t>(seq_of[static_cast<std::size_t>(t)] * max_pages +
                                                                p / k::kKVPageSize)];
            for (int64_t h = 0; h < kv_heads; ++h)
              for (int64_t i = 0; i < D; ++i) {
                const float a = got_k.data<float>()[((page * kv_heads + h) * k::kKVPageSize + p % k::kKVPageSize) * D + i];
                const float b = k_rows.data<float>()[(t * kv_heads + h) * D + i];
                if (dt == DType::kF32) ASSERT_NEAR(a, b, 1e-6f + 1e-6f * std::abs(b)) << what << " k vs unfused GPU";
                else ASSERT_EQ(a, b) << what << " k vs unfused GPU, token " << t << " head " << h << " i " << i;
              }
          }
        }
}

TEST_F(GpuFusedOpsTest, SiluAndMulPackedMatchesCpu) {
  for (DType dt : kDtypes)
    for (auto [N, I] : {std::pair<int64_t, int64_t>{1, 3072}, {3, 67}, {8, 3072}, {5, 1000}}) {
      Tensor gu = rounded(random({N, 2 * I}, 6.0f), dt);
      Tensor want = Tensor::empty({N, I}, DType::kF32);
      k::silu_and_mul_packed(gu, dt, want);
      Tensor out = poisoned({N, I}, dt);
      k::silu_and_mul_packed(to_gpu(gu, dt), dt, out);
      const Tolerance tol = tolerance(dt);
      expect_close(out, want, tol.atol, tol.rtol,
                   std::string("silu_and_mul_packed ") + name(dt) + " " + std::to_string(N) + "x" + std::to_string(I));
    }
}

TEST_F(GpuFusedOpsTest, EmbeddingByTensorIdsCopiesRowsAndZeroFillsBadIds) {
  for (DType dt : kDtypes)
    for (int64_t width : {1024, 33, 6}) {
      const int64_t rows = 97;
      Tensor w = rounded(random({rows, width}), dt);
      std::vector<int32_t> ids;
      for (int i = 0; i < 13; ++i) ids.push_back(static_cast<int32_t>(rng_() % rows));
      ids.push_back(ids[0]);
      const auto n = static_cast<int64_t>(ids.size());
      Tensor want = Tensor::empty({n, width}, DType::kF32);
      k::embedding(w, ids, want);
      Tensor gw = to_gpu(w, dt), out = poisoned({n, width}, dt);
      k::embedding(gw, gpu_i32(ids), out);
      const std::string what = std::string("embedding ") + name(dt) + " width " + std::to_string(width);
      expect_equal(out, want, what);

      // Row gather from a view starting at row 1 (unaligned when width is odd).
      Tensor view = gw.slice_rows(1, rows), picked = poisoned({2, width}, dt);
      k::embedding(view, gpu_i32({0, 95}), picked);
      Tensor want2 = Tensor::empty({2, width}, DType::kF32);
      k::embedding(w, std::vector<int32_t>{1, 96}, want2);
      expect_equal(picked, want2, what + " (view)");

      // Out-of-range ids cannot throw on the GPU: their rows are zeros.
      Tensor bad = poisoned({3, width}, dt);
      k::embedding(gw, gpu_i32({-1, 5, static_cast<int32_t>(rows)}), bad);
      Tensor host = to_host_f32(bad);
      for (int64_t i = 0; i < width; ++i) {
        EXPECT_EQ(host.data<float>()[i], 0.0f) << what;
        EXPECT_EQ(host.data<float>()[width + i], w.data<float>()[5 * width + i]) << what;
        EXPECT_EQ(host.data<float>()[2 * width + i], 0.0f) << what;
      }
    }
  Tensor w = to_gpu(random({4, 8}), DType::kBF16), out = poisoned({2, 8}, DType::kBF16);
  EXPECT_THROW(k::embedding(w, host_i32({0, 1}), out), Error);  // ids on another device
}

TEST_F(GpuFusedOpsTest, ArgmaxRowsMatchesHostArgmax) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (DType dt : kDtypes)
    for (int64_t V : {1, 7, 1000, 4097, 151936})
      for (int64_t B : {1, 3, 8, 1030}) {
        if (B == 1030 && V > 4097) continue;
        Tensor logits = rounded(random({B, V}, 8.0f), dt);
        float* x = logits.mutable_data<float>();
        if (B >= 3 && V >= 7) {
          // Row 1: a tie across chunks (the first wins); row 2: all -inf but NaNs late.
          x[1 * V + V / 3] = x[1 * V + V - 1] = 100.0f;
          for (int64_t i = 0; i < V; ++i) x[2 * V + i] = -inf;
          x[2 * V + V - 2] = nan;
          x[2 * V + V - 1] = nan;
        }
        if (B >= 8 && V >= 7) {
          for (int64_t i = 0; i < V; ++i) x[3 * V + i] = -inf;  // all -inf: 0
          for (int64_t i = 0; i < V; ++i) x[4 * V + i] = -1.0f;
          x[4 * V + V - 1] = 0.0f;
          x[4 * V + V / 2] = -0.0f;  // equal to +0: the earlier index
          x[5 * V + V - 1] = 1000.0f;  // the very last element
        }
        const std::string what = std::string("argmax_rows ") + name(dt) + " B " + std::to_string(B) + " V " +
                                 std::to_string(V);
        Tensor gl = to_gpu(logits, dt);
        for (int repeat = 0; repeat < 2; ++repeat) {  // the static slots are clean again after a call
          Tensor ids = gpu_i32(std::vector<int32_t>(static_cast<std::size_t>(B), -7));
          k::argmax_rows(gl, ids);
          Tensor got = ids.to(Device::cpu());
          for (int64_t b = 0; b < B; ++b)
            ASSERT_EQ(got.data<int32_t>()[b], k::argmax(std::span<const float>(x + b * V, static_cast<std::size_t>(V))))
                << what << " row " << b;
        }
      }
}

// ---- linear ------------------------------------------------------------------

struct LinearCase {
  int64_t rows, in, out;
  bool bias;
  bool view;  // x as rows [1, rows + 1) of a larger tensor (unaligned when `in` is odd)
};

class GpuLinearTest : public RandomTest {
 protected:
  void check_linear(DType storage, DType dtype, const LinearCase& c);
};

void GpuLinearTest::check_linear(DType storage, DType dtype, const LinearCase& c) {
  const std::string what = std::string("linear ") + name(storage) + "/" + name(dtype) + " " + std::to_string(c.rows) +
                           "x" + std::to_string(c.in) + "->" + std::to_string(c.out) + (c.bias ? " +bias" : "") +
                           (c.view ? " view" : "");
  Tensor x_all = rounded(random({c.rows + 1, c.in}), dtype);
  Tensor x = c.view ? x_all.slice_rows(1, c.rows + 1) : x_all.slice_rows(0, c.rows);
  Tensor w = rounded(random({c.out, c.in}, 0.1f), dtype);
  Tensor b = c.bias ? rounded(random({c.out}), dtype) : Tensor();
  Tensor want = Tensor::empty({c.rows, c.out}, DType::kF32);
  k::linear(x.clone(), w, b, dtype, want);
  Tensor gx_all = to_gpu(x_all, storage);
  Tensor gx = c.view ? gx_all.slice_rows(1, c.rows + 1) : gx_all.slice_rows(0, c.rows);
  Tensor gw = to_gpu(w, storage), gb = c.bias ? to_gpu(b, storage) : Tensor();
  const Tolerance tol = tolerance(dtype, std::sqrt(static_cast<float>(c.in)) / 4);
  for (int call = 0; call < 2; ++call) {  // the second call reuses the cached plan
    Tensor y = poisoned({c.rows, c.out}, storage);
    k::linear(gx, gw, gb, dtype, y);
    expect_close(y, want, tol.atol, tol.rtol, what + (call ? " (again)" : ""));
  }
}

TEST_F(GpuLinearTest, GemvLinearMatchesCpuForRowsUpTo8) {
  for (DType dt : kDtypes)
    for (int64_t rows = 1; rows <= k::gpu::kGemvMaxRows; ++rows)
      for (LinearCase c : {LinearCase{0, 1024, 96, false, false}, LinearCase{0, 1000, 257, true, false},
                           LinearCase{0, 1001, 33, true, true}, LinearCase{0, 64, 5, false, true},
                           LinearCase{0, 3072, 1024, true, false}, LinearCase{0, 8, 4099, false, false},
                           // more tiles than blocks (the grid is capped per SM): split 1 and split > 1
                           LinearCase{0, 256, 20000, true, false}, LinearCase{0, 4096, 8192, false, false}}) {
        c.rows = rows;
        check_linear(dt, dt, c);
      }
  // F32 storage emulating bf16 (rounded once, after the bias).
  check_linear(DType::kF32, DType::kBF16, LinearCase{3, 1024, 200, true, false});
}

// fused_linear (the decode path's projections): each fused input/output
// against the CPU composition of the unfused ops, rows 1..8.
TEST_F(GpuLinearTest, FusedLinearMatchesCpuComposition) {
  for (DType dt : kDtypes)
    for (int64_t rows : {1, 2, 3, 5, 8})
      for (int kind = 0; kind < 5; ++kind) {  // plain+residual, norm, swiglu, norm+swiglu, swiglu+residual (odd out)
        const bool norm = kind == 1 || kind == 3, swiglu = kind >= 2, residual = kind == 0 || kind == 4;
        const int64_t in = kind == 4 ? 768 : 1024, out = kind == 1 ? 4100 : kind == 4 ? 1027 : 1024;
        const std::string what = std::string("fused_linear ") + name(dt) + " rows " + std::to_string(rows) +
                                 (norm ? " norm" : "") + (swiglu ? " swiglu" : "") + (residual ? " +residual" : "");
        const int64_t wrows = swiglu ? 2 * out : out;
        Tensor x = rounded(random({rows, in}), dt);
        Tensor w = rounded(random({wrows, in}, 0.05f), dt);
        Tensor b = kind == 1 || kind == 3 ? rounded(random({wrows}), dt) : Tensor();
        Tensor nw = rounded(random({in}, 0.2f), dt);
        Tensor res = rounded(random({rows, out}), dt);
        k::LinearFusion f;
        f.norm_weight = norm ? &nw : nullptr;
        f.eps = 1e-6;
        f.swiglu_output = swiglu;
        Tensor want_res = res.clone();
        f.residual = residual ? &want_res : nullptr;
        Tensor want = Tensor::empty({rows, out}, DType::kF32);
        k::fused_linear(x, w, b, dt, f, want);
        Tensor gx = to_gpu(x, dt), gw = to_gpu(w, dt), gb = b.defined() ? to_gpu(b, dt) : Tensor();
        Tensor gnw = to_gpu(nw, dt), gres = to_gpu(res, dt);
        k::LinearFusion gf = f;
        gf.norm_weight = norm ? &gnw : nullptr;
        gf.residual = residual ? &gres : nullptr;
        ASSERT_TRUE(k::fused_linear_supported(gx, gw, gf)) << what;
        Tensor y = poisoned({rows, out}, dt);
        k::fused_linear(gx, gw, gb, dt, gf, y);
        // The SwiGLU output multiplies two rounded projections: one more
        // rounding step of the projection's error than a plain output.
        const Tolerance tol = tolerance(dt, std::sqrt(static_cast<float>(in)) / (swiglu ? 2 : 4));
        expect_close(y, want, tol.atol, tol.rtol, what);
        if (residual) expect_close(gres, want_res, tol.atol, tol.rtol, what + " residual");
      }
  // Beyond 8 rows the caller must use the unfused ops.
  Tensor gx = to_gpu(random({9, 64}), DType::kBF16), gw = to_gpu(random({8, 64}), DType::kBF16);
  EXPECT_FALSE(k::fused_linear_supported(gx, gw, k::LinearFusion{}));
}

TEST_F(GpuLinearTest, PlanCachedLinearMatchesCpuForLargerRows) {
  for (DType dt : kDtypes)
    for (int64_t rows : {9, 17, 64, 300})
      for (LinearCase c : {LinearCase{0, 1024, 96, false, false}, LinearCase{0, 1000, 257, true, false},
                           LinearCase{0, 1001, 33, true, true}}) {
        c.rows = rows;
        check_linear(dt, dt, c);
      }
  check_linear(DType::kF32, DType::kBF16, LinearCase{40, 512, 200, true, false});
}

TEST_F(GpuLinearTest, GemvBandwidth) {
  struct Shape2 {
    int64_t out, in;
  };
  const Device gpu = test_gpu();
  std::printf("device-to-device copy: %.0f GB/s\n", measure_copy_bandwidth(gpu, std::size_t{1} << 30) / 1e9);
  for (Shape2 s : {Shape2{151936, 1024}, Shape2{6144, 1024}, Shape2{4096, 1024}, Shape2{1024, 3072},
                   Shape2{1024, 2048}}) {
    Tensor w = to_gpu(random({s.out, s.in}, 0.05f), DType::kBF16);
    for (int64_t rows : {1, 2, 4, 8}) {
      Tensor x = to_gpu(random({rows, s.in}), DType::kBF16);
      Tensor y = poisoned({rows, s.out}, DType::kBF16);
      for (int i = 0; i < 3; ++i) k::linear(x, w, Tensor(), DType::kBF16, y);
      DeviceTimer timer(gpu);
      constexpr int kCalls = 50;
      timer.start();
      for (int i = 0; i < kCalls; ++i) k::linear(x, w, Tensor(), DType::kBF16, y);
      const double ms = timer.stop_ms() / kCalls;
      const double bytes = static_cast<double>(w.nbytes() + x.nbytes() + y.nbytes());
      std::printf("gemv bf16 [%lld, %lld] rows %lld: %.2f us, %.0f GB/s\n", static_cast<long long>(s.out),
                  static_cast<long long>(s.in), static_cast<long long>(rows), ms * 1e3, bytes / (ms * 1e-3) / 1e9);
    }
  }
}

}  // namespace
}  // namespace hipformers::testing
