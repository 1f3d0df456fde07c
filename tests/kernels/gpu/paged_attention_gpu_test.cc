// The GPU paged-attention kernels (split-K decode, flash prefill) against
//   (a) the CPU paged reference, for small and medium shapes, and
//   (b) the GPU eager kernel (kernels::attention with spec.eager) over a
//       contiguous cache holding the same keys, for long lengths (prefill of
//       8192 tokens, decode at 8192) where the CPU would be slow.
// Pages sit in a scrambled order of the pool, unused slots NaN (so a read
// outside a sequence shows); outputs start as NaN, the split-K scratch zeroed
// (its merge counters must start at zero; the kernels leave them so, which
// the reused-scratch case checks).
// Error measure: max|gpu - ref| / max|ref| per case; float32 <= 1e-4,
// float16 <= 5e-3, bfloat16 <= 2e-2. Each case prints one table row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "hipformers/core/error.h"
#include "hipformers/kernels/attention.h"
#include "hipformers/kernels/paged_attention.h"
#include "hipformers/kernels/qkv_rope.h"
#include "hipformers/kernels/rotary.h"

namespace hipformers::testing {
namespace {

namespace k = hipformers::kernels;

Tensor zeroed_scratch(int64_t n) { return to_gpu(Tensor::zeros({n}, DType::kF32), DType::kF32); }

struct SeqShape {
  int64_t len;      // keys in the cache after this step
  int64_t queries;  // the last `queries` positions are this step's tokens
};

Tensor i32(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kI32);
  std::copy(v.begin(), v.end(), t.mutable_data<int32_t>());
  return t;
}

float limit(DType dt) { return dt == DType::kBF16 ? 2e-2f : dt == DType::kF16 ? 5e-3f : 1e-4f; }

// max|a - e| / max|e|; infinite if any element is NaN.
double rel_error(const Tensor& actual_host, const Tensor& expected_host) {
  const float* a = actual_host.data<float>();
  const float* e = expected_host.data<float>();
  double max_diff = 0, max_ref = 0;
  for (int64_t i = 0; i < actual_host.numel(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - e[i]);
    if (!(d == d)) return std::numeric_limits<double>::infinity();
    max_diff = std::max(max_diff, d);
    max_ref = std::max(max_ref, std::abs(static_cast<double>(e[i])));
  }
  return max_diff / std::max(max_ref, 1e-30);
}

void print_header() {
  static bool printed = false;
  if (printed) return;
  printed = true;
  std::printf("\n| case | reference | dtype | max rel error | limit |\n|---|---|---|---|---|\n");
}

// A batch on the host (F32, values rounded to the dtype) and on the GPU.
struct Paged {
  k::AttentionSpec spec;
  DType dt = DType::kF32;
  std::vector<SeqShape> seqs;
  std::vector<Tensor> seq_k, seq_v;  // per sequence [len, kv_heads * head_dim]
  k::PagedBatch host_batch, gpu_batch;
  k::PagedKVLayer host_cache, gpu_cache;
  Tensor q_host, q_gpu;
};

class GpuPagedAttentionTest : public RandomTest {
 protected:
  Tensor rnd(const Shape& shape, DType dt) { return rounded(random(shape), dt); }

  // bound_seq_len / bound_query_len: launch bounds above the batch's actual
  // maxima (what a captured graph keeps); 0 for the exact maxima.
  Paged build(const k::AttentionSpec& spec, const std::vector<SeqShape>& seqs, int64_t bound_seq_len = 0,
              int64_t bound_query_len = 0) {
    Paged p;
    p.spec = spec;
    p.dt = spec.dtype;
    p.seqs = seqs;
    const int64_t KV = spec.kv_heads, D = spec.head_dim, H = spec.heads, P = k::kKVPageSize;
    const auto B = static_cast<int64_t>(seqs.size());
    int64_t total_pages = 2, tokens = 0, max_q = 0, max_len = 0;
    for (const SeqShape& s : seqs) {
      total_pages += (s.len + P - 1) / P;
      tokens += s.queries;
      max_q = std::max(max_q, s.queries);
      max_len = std::max(max_len, s.len);
    }
    max_len = std::max(max_len, bound_seq_len);
    max_q = std::max(max_q, bound_query_len);
    const int64_t table_width = std::max<int64_t>(1, (max_len + P - 1) / P);
    std::vector<int32_t> order(static_cast<std::size_t>(total_pages));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng_);
    const Shape pool{total_pages, KV, P, D};
    p.host_cache.k = Tensor::empty(pool, DType::kF32);
    p.host_cache.v = Tensor::empty(pool, DType::kF32);
    std::fill_n(p.host_cache.k.mutable_data<float>(), p.host_cache.k.numel(), std::numeric_limits<float>::quiet_NaN());
    std::fill_n(p.host_cache.v.mutable_data<float>(), p.host_cache.v.numel(), std::numeric_limits<float>::quiet_NaN());
    std::vector<int32_t> table(static_cast<std::size_t>(B * table_width), -1), query_start{0}, lens, pos, token_seq;
    std::size_t next_page = 0;
    for (int64_t b = 0; b < B; ++b) {
      const SeqShape& s = seqs[static_cast<std::size_t>(b)];
      for (int64_t pg = 0; pg < (s.len + P - 1) / P; ++pg)
        table[static_cast<std::size_t>(b * table_width + pg)] = order[next_page++];
      Tensor kk = rnd({s.len, KV * D}, p.dt), vv = rnd({s.len, KV * D}, p.dt);
      for (int64_t j = 0; j < s.len; ++j)
        for (int64_t g = 0; g < KV; ++g) {
          const int64_t page = table[static_cast<std::size_t>(b * table_width + j / P)];
          const int64_t dst = ((page * KV + g) * P + j % P) * D;
          std::copy_n(kk.data<float>() + (j * KV + g) * D, D, p.host_cache.k.mutable_data<float>() + dst);
          std::copy_n(vv.data<float>() + (j * KV + g) * D, D, p.host_cache.v.mutable_data<float>() + dst);
        }
      p.seq_k.push_back(kk);
      p.seq_v.push_back(vv);
      for (int64_t i = 0; i < s.queries; ++i) {
        pos.push_back(static_cast<int32_t>(s.len - s.queries + i));
        token_seq.push_back(static_cast<int32_t>(b));
      }
      query_start.push_back(static_cast<int32_t>(query_start.back() + s.queries));
      lens.push_back(static_cast<int32_t>(s.len));
    }
    k::PagedBatch& hb = p.host_batch;
    hb.num_seqs = B;
    hb.num_tokens = tokens;
    hb.max_query_len = max_q;
    hb.max_seq_len = max_len;
    hb.query_start = i32(query_start, {B + 1});
    hb.seq_lens = i32(lens, {B});
    hb.positions = i32(pos, {tokens});
    hb.token_seq = i32(token_seq, {tokens});
    hb.block_table = i32(table, {B, table_width});
    k::PagedBatch& gb = p.gpu_batch;
    gb = hb;
    gb.query_start = hb.query_start.to(test_gpu());
    gb.seq_lens = hb.seq_lens.to(test_gpu());
    gb.positions = hb.positions.to(test_gpu());
    gb.token_seq = hb.token_seq.to(test_gpu());
    gb.block_table = hb.block_table.to(test_gpu());
    p.gpu_cache.k = to_gpu(p.host_cache.k, p.dt);
    p.gpu_cache.v = to_gpu(p.host_cache.v, p.dt);
    p.q_host = rnd({tokens, H * D}, p.dt);
    p.q_gpu = to_gpu(p.q_host, p.dt);
    return p;
  }

  static Tensor run_gpu(const Paged& p) {
    const int64_t n = k::paged_attention_scratch_elems(p.gpu_batch, p.spec, test_gpu());
    Tensor scratch = n > 0 ? zeroed_scratch(n) : Tensor();
    Tensor out = poisoned({p.gpu_batch.num_tokens, p.spec.heads * p.spec.head_dim}, p.dt);
    k::paged_attention(p.q_gpu, p.gpu_batch, p.gpu_cache, p.spec, out, n > 0 ? &scratch : nullptr);
    return to_host_f32(out);
  }

  static Tensor cpu_reference(const Paged& p) {
    Tensor out = Tensor::empty({p.host_batch.num_tokens, p.spec.heads * p.spec.head_dim}, DType::kF32);
    k::paged_attention(p.q_host, p.host_batch, p.host_cache, p.spec, out, nullptr);
    return out;
  }

  // The GPU eager kernel, one sequence at a time over a contiguous cache.
  static Tensor eager_reference(const Paged& p) {
    k::AttentionSpec spec = p.spec;
    spec.eager = true;
    const int64_t W = spec.heads * spec.head_dim;
    Tensor out = Tensor::empty({p.host_batch.num_tokens, W}, DType::kF32);
    int64_t row = 0;
    for (std::size_t b = 0; b < p.seqs.size(); ++b) {
      const SeqShape& s = p.seqs[b];
      if (s.queries == 0) continue;
      const Shape shape{spec.kv_heads, s.len, spec.head_dim};
      k::KVCacheView cache{poisoned(shape, p.dt), poisoned(shape, p.dt), 0};
      k::kv_cache_append(cache, to_gpu(p.seq_k[b], p.dt), to_gpu(p.seq_v[b], p.dt));
      std::vector<int64_t> positions;
      for (int64_t i = 0; i < s.queries; ++i) positions.push_back(s.len - s.queries + i);
      Tensor o = poisoned({s.queries, W}, p.dt);
      k::attention(to_gpu(p.q_host.slice_rows(row, row + s.queries), p.dt), positions, cache, spec, o, nullptr);
      Tensor h = to_host_f32(o);
      std::copy_n(h.data<float>(), h.numel(), out.mutable_data<float>() + row * W);
      row += s.queries;
    }
    return out;
  }

  void check(const Paged& p, const Tensor& expected, const std::string& what, const char* ref_name) {
    const double err = rel_error(run_gpu(p), expected);
    print_header();
    std::printf("| %s | %s | %s | %.2e | %.0e |\n", what.c_str(), ref_name, dtype_torch_name(p.dt), err,
                static_cast<double>(limit(p.dt)));
    std::fflush(stdout);
    EXPECT_LE(err, limit(p.dt)) << what << " vs " << ref_name;
  }
  void vs_cpu(const Paged& p, const std::string& what) { check(p, cpu_reference(p), what, "cpu paged"); }
  void vs_eager(const Paged& p, const std::string& what) { check(p, eager_reference(p), what, "gpu eager"); }
};

k::AttentionSpec make_spec(int64_t heads, int64_t ratio, int64_t dim, std::optional<int64_t> window, DType dt) {
  k::AttentionSpec spec;
  spec.heads = heads;
  spec.kv_heads = heads / ratio;
  spec.head_dim = dim;
  spec.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  spec.sliding_window = window;
  spec.dtype = dt;
  return spec;
}

std::string describe(const k::AttentionSpec& s) {
  return "heads " + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " dim " +
         std::to_string(s.head_dim) + (s.sliding_window ? " window " + std::to_string(*s.sliding_window) : "");
}

const std::vector<SeqShape> kRaggedPrefill = {{200, 200}, {1, 1}, {130, 5}, {64, 64}, {9, 0}, {300, 17}, {129, 129}};
const std::vector<SeqShape> kDecode = {{1, 1}, {63, 1}, {64, 1}, {65, 1}, {300, 1}, {1000, 1}, {129, 1}};

TEST_F(GpuPagedAttentionTest, SmallAndMediumMatchCpuReference) {
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int64_t dim : {64, 128})
      for (int64_t ratio : {1, 2, 4, 8})
        for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{37}}) {
          const k::AttentionSpec spec = make_spec(8, ratio, dim, window, dt);
          vs_cpu(build(spec, kRaggedPrefill), "ragged prefill " + describe(spec));
          vs_cpu(build(spec, kDecode), "decode " + describe(spec));
        }
}

TEST_F(GpuPagedAttentionTest, OtherDtypesHeadDimsAndPaths) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    // Any even head_dim: the generic kernels (80, 256) and a group of 3.
    for (int64_t dim : {80, 256}) {
      const k::AttentionSpec spec = make_spec(6, 3, dim, std::nullopt, dt);
      vs_cpu(build(spec, kRaggedPrefill), "ragged prefill " + describe(spec));
      vs_cpu(build(spec, kDecode), "decode " + describe(spec));
    }
    // MQA with 16 query heads per kv head (two head chunks in decode).
    const k::AttentionSpec mqa = make_spec(16, 16, 128, std::optional<int64_t>{100}, dt);
    vs_cpu(build(mqa, kDecode), "decode " + describe(mqa));
    vs_cpu(build(mqa, kRaggedPrefill), "ragged prefill " + describe(mqa));
    // One query per sequence but max_query_len 2: the prefill kernel on a decode batch.
    const k::AttentionSpec spec = make_spec(16, 2, 128, std::nullopt, dt);
    vs_cpu(build(spec, kDecode, 0, 2), "decode through prefill kernel " + describe(spec));
  }
}

TEST_F(GpuPagedAttentionTest, LongPrefillMatchesEagerKernel) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    // Qwen3-0.6B's attention shape, one 8192-token prompt.
    const k::AttentionSpec qwen = make_spec(16, 2, 128, std::nullopt, dt);
    vs_eager(build(qwen, {{8192, 8192}}), "prefill 8192 " + describe(qwen));
    // Ragged long batch, chunked prefill after a long prefix, sliding window.
    for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{1000}}) {
      const k::AttentionSpec spec = make_spec(8, 4, 64, window, dt);
      vs_eager(build(spec, {{3000, 3000}, {5000, 100}, {1, 1}, {2048, 2048}, {4097, 4097}}),
               "ragged prefill to 5000 " + describe(spec));
      const k::AttentionSpec gqa8 = make_spec(16, 8, 128, window, dt);
      vs_eager(build(gqa8, {{8192, 8192}}), "prefill 8192 " + describe(gqa8));
    }
  }
}

// flash_attention_3 (AttentionSpec::hopper_kernels): on sm_90+ the prefill's
// K/V pages come in by TMA tensor copies and, in the sm_90a build, Q K^T
// and P V are warpgroup MMAs (wgmma) reading K and V from shared memory
// (paged_prefill_sm90_gpu.cu). The products are the mma.sync kernel's 16-wide
// f32 tensor-core sums in the same order, and the rest of the math is
// shared, so the two kernels must agree bit for bit (they do on an H100,
// with P V by wgmma or, HIPFORMERS_FA3_PV=mma, by mma.sync); both are also
// checked against the references, over head dims 64/128, GQA 1/2/4/8,
// windows, ragged batches (the NaN-filled unused slots check the
// zero-filled rows) and 8192 tokens.
TEST_F(GpuPagedAttentionTest, Flash3HopperPrefillMatchesDefaultKernelAndReferences) {
  auto bits_equal = [](const Tensor& a, const Tensor& b) {
    return a.numel() == b.numel() &&
           std::memcmp(a.data<float>(), b.data<float>(), static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0;
  };
  for (DType dt : {DType::kBF16, DType::kF16})
    for (int64_t dim : {64, 128})
      for (int64_t ratio : {1, 2, 4, 8})
        for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{37}}) {
          k::AttentionSpec spec = make_spec(8, ratio, dim, window, dt);
          const Paged base = build(spec, kRaggedPrefill);
          Paged fa3 = base;
          fa3.spec.hopper_kernels = true;
          EXPECT_TRUE(bits_equal(run_gpu(fa3), run_gpu(base))) << "flash_attention_3 vs sdpa " << describe(spec);
          vs_cpu(fa3, "flash_attention_3 ragged prefill " + describe(spec));
        }
  for (DType dt : {DType::kBF16, DType::kF16}) {
    k::AttentionSpec qwen = make_spec(16, 2, 128, std::nullopt, dt);
    qwen.hopper_kernels = true;
    vs_eager(build(qwen, {{8192, 8192}}), "flash_attention_3 prefill 8192 " + describe(qwen));
    k::AttentionSpec spec = make_spec(8, 4, 64, std::optional<int64_t>{1000}, dt);
    spec.hopper_kernels = true;
    vs_eager(build(spec, {{3000, 3000}, {5000, 100}, {1, 1}, {2048, 2048}, {4097, 4097}}),
             "flash_attention_3 ragged prefill to 5000 " + describe(spec));
  }
}

TEST_F(GpuPagedAttentionTest, LongDecodeMatchesEagerKernel) {
  const std::vector<SeqShape> seqs = {{8192, 1}, {5000, 1}, {1, 1}, {64, 1}, {65, 1}, {4097, 1}, {8191, 1}};
  for (DType dt : {DType::kF32, DType::kBF16})
    for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{700}}) {
      for (int64_t ratio : {1, 2, 4, 8}) {
        const k::AttentionSpec spec = make_spec(16, ratio, 128, window, dt);
        vs_eager(build(spec, seqs), "decode to 8192 " + describe(spec));
      }
      const k::AttentionSpec d64 = make_spec(8, 8, 64, window, dt);
      vs_eager(build(d64, seqs), "decode to 8192 " + describe(d64));
      // Batch 1 at 8192: the most splits.
      const k::AttentionSpec one = make_spec(16, 2, 128, window, dt);
      vs_eager(build(one, {{8192, 1}}), "decode batch 1 at 8192 " + describe(one));
    }
}

TEST_F(GpuPagedAttentionTest, SplitKWithLengthsBelowTheLaunchBound) {
  // A captured graph keeps max_seq_len = 8192 and is replayed with shorter
  // sequences: the splits past a sequence's end must drop out.
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const k::AttentionSpec spec = make_spec(16, 2, 128, std::nullopt, dt);
    Paged a = build(spec, {{100, 1}, {1, 1}, {700, 1}}, 8192);
    Paged b = build(spec, {{8000, 1}, {64, 1}, {3, 1}}, 8192);
    const int64_t need = k::paged_attention_scratch_elems(a.gpu_batch, spec, test_gpu());
    EXPECT_GT(need, 0) << "split-K expected for a bound of 8192";
    EXPECT_EQ(need, k::paged_attention_scratch_elems(b.gpu_batch, spec, test_gpu()));
    vs_cpu(a, "decode below bound 8192 (100, 1, 700) " + describe(spec));
    vs_cpu(b, "decode below bound 8192 (8000, 64, 3) " + describe(spec));
    // The same scratch and output buffers for both, as a replayed graph uses them.
    Tensor scratch = zeroed_scratch(need);
    Tensor out = poisoned({3, spec.heads * spec.head_dim}, dt);
    for (Paged* p : {&a, &b, &a}) {
      k::paged_attention(p->q_gpu, p->gpu_batch, p->gpu_cache, spec, out, &scratch);
      const double err = rel_error(to_host_f32(out), cpu_reference(*p));
      EXPECT_LE(err, limit(dt)) << "reused scratch";
    }
    const k::AttentionSpec win = make_spec(8, 4, 64, std::optional<int64_t>{300}, dt);
    vs_cpu(build(win, {{2000, 1}, {10, 1}, {301, 1}}, 8192), "decode below bound 8192 " + describe(win));
  }
}

// One scratch shared by decode batches of different sizes, as the step
// workspace shares it between the graphs of each batch size: a batch's
// partials must never land on another batch's merge counters (a counter
// left non-zero makes every later merge of that column skip). Batch sizes
// 1..12 cross the wide (<= 8 sequences) and split kernels and change the
// split count; each run is checked against the CPU, in a sequence that
// revisits sizes after larger ones wrote their partials.
TEST_F(GpuPagedAttentionTest, DecodeBatchesOfEverySizeShareOneScratch) {
  for (DType dt : {DType::kBF16, DType::kF32}) {
    const k::AttentionSpec spec = make_spec(16, 2, 128, std::nullopt, dt);
    constexpr int64_t kBound = 2048, kMaxSeqs = 12;
    const int64_t elems = k::paged_attention_shared_scratch_elems(kMaxSeqs, kBound, spec, test_gpu());
    ASSERT_GT(elems, 0);
    Tensor scratch = zeroed_scratch(elems);
    for (int64_t n : {5, 4, 1, 12, 3, 9, 2, 8, 5, 1, 11, 4}) {
      std::vector<SeqShape> seqs;
      for (int64_t b = 0; b < n; ++b) seqs.push_back({1 + (b * 577 + n * 131) % 2000, 1});
      Paged p = build(spec, seqs, kBound);
      ASSERT_LE(k::paged_attention_scratch_elems(p.gpu_batch, spec, test_gpu()), elems);
      Tensor out = poisoned({n, spec.heads * spec.head_dim}, dt);
      k::paged_attention(p.q_gpu, p.gpu_batch, p.gpu_cache, spec, out, &scratch);
      const double err = rel_error(to_host_f32(out), cpu_reference(p));
      EXPECT_LE(err, limit(dt)) << "shared scratch, batch " << n << " " << dtype_torch_name(dt);
    }
  }
}

// Decode batches of more than 8 sequences (the split kernel in 16-bit
// storage; smaller ones take the wide kernel).
TEST_F(GpuPagedAttentionTest, LargeDecodeBatchesMatchCpuReference) {
  std::vector<SeqShape> seqs;
  for (int64_t b = 0; b < 20; ++b) seqs.push_back({1 + (b * 389) % 3000, 1});
  for (DType dt : {DType::kBF16, DType::kF16})
    for (int64_t dim : {64, 128})
      for (int64_t ratio : {1, 2, 8})
        for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{300}}) {
          const k::AttentionSpec spec = make_spec(16, ratio, dim, window, dt);
          vs_cpu(build(spec, seqs), "decode 20 sequences " + describe(spec));
        }
}

// qkv_rope_paged_attention: the fused decode kernel (q/k norm + RoPE + cache
// write in the attention prologue) against the two ops it replaces, on the
// GPU (bit for bit in 16-bit storage; F32 may differ by fma contraction) and
// against the CPU (which runs the two ops).
TEST_F(GpuPagedAttentionTest, FusedQkvDecodeMatchesTheTwoOps) {
  struct Case {
    int64_t heads, kv_heads, D;
    std::optional<int64_t> window;
    bool norm;
    int64_t bound;  // max_seq_len launch bound (0: exact)
  };
  const std::vector<SeqShape> seqs = {{1, 1}, {64, 1}, {65, 1}, {300, 1}, {4000, 1}};
  const Case cases[] = {{16, 8, 128, std::nullopt, true, 0},   {16, 8, 128, std::nullopt, true, 8192},
                        {32, 2, 128, 700, true, 8192},         {8, 1, 64, std::nullopt, false, 0},
                        {12, 4, 80, std::nullopt, true, 4096}, {4, 4, 256, 100, false, 0}};
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (const Case& c : cases) {
      const k::AttentionSpec spec = make_spec(c.heads, c.heads / c.kv_heads, c.D, c.window, dt);
      const std::string what = "fused qkv decode " + describe(spec) + (c.norm ? " norm" : "") + " bound " +
                               std::to_string(c.bound);
      Paged p = build(spec, seqs, c.bound);
      const int64_t B = p.host_batch.num_seqs, H = c.heads, KV = c.kv_heads, D = c.D;
      k::RopeSpec rope;
      rope.theta = 1000000.0;
      rope.head_dim = D;
      const k::RopeFrequencies freqs = k::rope_frequencies(rope);
      Tensor inv_host = Tensor::empty({D / 2}, DType::kF32);
      std::copy(freqs.inv_freq.begin(), freqs.inv_freq.end(), inv_host.mutable_data<float>());
      Tensor inv_gpu = inv_host.to(test_gpu());
      Tensor qkv = rnd({B, (H + 2 * KV) * D}, dt);
      Tensor qn = c.norm ? rnd({D}, dt) : Tensor(), kn = c.norm ? rnd({D}, dt) : Tensor();
      Tensor gqn = c.norm ? to_gpu(qn, dt) : Tensor(), gkn = c.norm ? to_gpu(kn, dt) : Tensor();
      const int64_t need = k::paged_attention_scratch_elems(p.gpu_batch, spec, test_gpu());
      auto run = [&](bool fused, k::PagedKVLayer& cache, const k::AttentionSpec& sp) {
        Tensor scratch = need > 0 ? zeroed_scratch(need) : Tensor();
        Tensor q = poisoned({B, H * D}, dt), out = poisoned({B, H * D}, dt);
        if (fused)
          k::qkv_rope_paged_attention(to_gpu(qkv, dt), gqn, gkn, 1e-6, inv_gpu, freqs.attention_scaling, p.gpu_batch,
                                      sp, cache, q, out, need > 0 ? &scratch : nullptr);
        else {
          k::qkv_rope_write(to_gpu(qkv, dt), gqn, gkn, 1e-6, inv_gpu, freqs.attention_scaling, p.gpu_batch, H, KV, dt,
                            cache, q);
          k::paged_attention(q, p.gpu_batch, cache, sp, out, need > 0 ? &scratch : nullptr);
        }
        return to_host_f32(out);
      };
      k::PagedKVLayer two{to_gpu(p.host_cache.k, dt), to_gpu(p.host_cache.v, dt)};
      k::PagedKVLayer one{to_gpu(p.host_cache.k, dt), to_gpu(p.host_cache.v, dt)};
      const Tensor want = run(false, two, spec), got = run(true, one, spec);
      // The registry's batched-path choices: RoPE in its own kernel
      // (rotary_qkv_write) is the two ops, bit for bit; the split-K decode
      // kernel for every batch (attention_paged_split) sums in another order.
      k::AttentionSpec rope_first = spec, split = spec;
      rope_first.rope_in_attention = false;
      split.split_decode = true;
      k::PagedKVLayer three{to_gpu(p.host_cache.k, dt), to_gpu(p.host_cache.v, dt)};
      k::PagedKVLayer four{to_gpu(p.host_cache.k, dt), to_gpu(p.host_cache.v, dt)};
      const Tensor got_rope_first = run(true, three, rope_first), got_split = run(true, four, split);
      // CPU: the two ops.
      k::PagedKVLayer host{p.host_cache.k.clone(), p.host_cache.v.clone()};
      Tensor host_q = Tensor::empty({B, H * D}, DType::kF32), host_out = Tensor::empty({B, H * D}, DType::kF32);
      k::qkv_rope_paged_attention(qkv, qn, kn, 1e-6, inv_host, freqs.attention_scaling, p.host_batch, spec, host,
                                  host_q, host_out, nullptr);
      const double err_cpu = rel_error(got, host_out);
      print_header();
      std::printf("| %s | CPU two ops | %s | %.2e | %.0e |\n", what.c_str(), dtype_torch_name(dt), err_cpu, limit(dt));
      EXPECT_LE(err_cpu, limit(dt)) << what;
      auto same = [&](const Tensor& a, const Tensor& b, const std::string& name) {
        ASSERT_EQ(a.numel(), b.numel());
        int64_t bad = 0;
        for (int64_t i = 0; i < a.numel(); ++i) {
          const float x = a.data<float>()[i], y = b.data<float>()[i];
          const bool equal = dt == DType::kF32 ? (std::isnan(x) && std::isnan(y)) || std::abs(x - y) <= 1e-5f * (1 + std::abs(y))
                                               : std::memcmp(&x, &y, sizeof(float)) == 0;
          if (!equal && bad++ < 5) ADD_FAILURE() << what << " " << name << " element " << i << ": " << x << " vs " << y;
        }
        EXPECT_EQ(bad, 0) << what << " " << name;
      };
      same(got, want, "out vs the two GPU ops");
      same(got_rope_first, want, "rotary_qkv_write out vs the two GPU ops");
      same(to_host_f32(three.k), to_host_f32(two.k), "rotary_qkv_write k pool");
      const double err_split = rel_error(got_split, host_out);
      std::printf("| %s | CPU two ops, split-K decode | %s | %.2e | %.0e |\n", what.c_str(), dtype_torch_name(dt),
                  err_split, limit(dt));
      EXPECT_LE(err_split, limit(dt)) << what << " split-K";
      same(to_host_f32(one.k), to_host_f32(two.k), "k pool");
      same(to_host_f32(one.v), to_host_f32(two.v), "v pool");
    }
}

TEST_F(GpuPagedAttentionTest, RejectsTooSmallScratch) {
  const k::AttentionSpec spec = make_spec(16, 2, 128, std::nullopt, DType::kBF16);
  Paged p = build(spec, {{5000, 1}});
  const int64_t need = k::paged_attention_scratch_elems(p.gpu_batch, spec, test_gpu());
  ASSERT_GT(need, 0);
  Tensor small = poisoned({need - 1}, DType::kF32);
  Tensor out = poisoned({1, spec.heads * spec.head_dim}, DType::kBF16);
  EXPECT_THROW(k::paged_attention(p.q_gpu, p.gpu_batch, p.gpu_cache, spec, out, &small), hipformers::Error);
  EXPECT_THROW(k::paged_attention(p.q_gpu, p.gpu_batch, p.gpu_cache, spec, out, nullptr), hipformers::Error);
  Paged host_index = p;
  host_index.gpu_batch.seq_lens = p.host_batch.seq_lens;  // index tensor on the wrong device
  Tensor scratch = poisoned({need}, DType::kF32);
  EXPECT_THROW(k::paged_attention(p.q_gpu, host_index.gpu_batch, p.gpu_cache, spec, out, &scratch), hipformers::Error);
}

}  // namespace
}  // namespace hipformers::testing
