// The CPU paged-attention reference against the contiguous-cache sdpa
// reference (kernels::attention) on the same keys: sequences of different
// lengths whose pages sit in a scrambled order of the pool (unused slots
// NaN, so a read outside a sequence shows), ragged prefill (whole prompts and
// chunks after a cached prefix), decode (one query per sequence), GQA 1/2/4/8,
// head_dim 64 and 128, a sliding window, fp32 and emulated bf16. Same math in
// the same order, so the outputs must be identical. Plus the argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/kernels/attention.h"
#include "hipformers/kernels/paged_attention.h"
#include "test_random.h"
#include "test_util.h"

namespace hipformers::testing {
namespace {

namespace k = hipformers::kernels;

struct SeqShape {
  int64_t len;      // keys in the cache after this step
  int64_t queries;  // the last `queries` positions are this step's tokens
};

Tensor i32(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kI32);
  std::copy(v.begin(), v.end(), t.mutable_data<int32_t>());
  return t;
}

// A batch with its pools, the per-sequence keys/values and queries it was
// built from, and the contiguous-cache reference output.
struct Case {
  k::AttentionSpec spec;
  std::vector<SeqShape> seqs;
  k::PagedBatch batch;
  k::PagedKVLayer cache;
  Tensor q, expected;
};

class PagedAttentionTest : public RandomTest {
 protected:
  Tensor rnd(const Shape& shape, DType dt) {
    Tensor t = random(shape);
    return dt == DType::kF32 ? t : t.to(dt).to(DType::kF32);
  }

  Case build(const k::AttentionSpec& spec, const std::vector<SeqShape>& seqs, int64_t spare_pages = 3) {
    Case c;
    c.spec = spec;
    c.seqs = seqs;
    const int64_t KV = spec.kv_heads, D = spec.head_dim, H = spec.heads, P = k::kKVPageSize;
    const auto B = static_cast<int64_t>(seqs.size());
    int64_t total_pages = spare_pages, max_pages = 1, tokens = 0, max_q = 0, max_len = 0;
    for (const SeqShape& s : seqs) {
      total_pages += (s.len + P - 1) / P;
      max_pages = std::max(max_pages, (s.len + P - 1) / P);
      tokens += s.queries;
      max_q = std::max(max_q, s.queries);
      max_len = std::max(max_len, s.len);
    }
    // Scrambled page order; every slot NaN until written.
    std::vector<int32_t> order(static_cast<std::size_t>(total_pages));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng_);
    const Shape pool{total_pages, KV, P, D};
    c.cache.k = Tensor::empty(pool, DType::kF32);
    c.cache.v = Tensor::empty(pool, DType::kF32);
    std::fill_n(c.cache.k.mutable_data<float>(), c.cache.k.numel(), std::numeric_limits<float>::quiet_NaN());
    std::fill_n(c.cache.v.mutable_data<float>(), c.cache.v.numel(), std::numeric_limits<float>::quiet_NaN());

    std::vector<int32_t> table(static_cast<std::size_t>(B * (max_pages + 1)), -1), query_start{0}, lens, pos,
        token_seq;
    c.q = rnd({tokens, H * D}, spec.dtype);
    c.expected = Tensor::empty({tokens, H * D}, DType::kF32);
    std::size_t next_page = 0;
    int64_t row = 0;
    for (int64_t b = 0; b < B; ++b) {
      const SeqShape& s = seqs[static_cast<std::size_t>(b)];
      for (int64_t p = 0; p < (s.len + P - 1) / P; ++p)
        table[static_cast<std::size_t>(b * (max_pages + 1) + p)] = order[next_page++];
      Tensor kk = rnd({s.len, KV * D}, spec.dtype), vv = rnd({s.len, KV * D}, spec.dtype);
      for (int64_t j = 0; j < s.len; ++j)
        for (int64_t g = 0; g < KV; ++g) {
          const int64_t page = table[static_cast<std::size_t>(b * (max_pages + 1) + j / P)];
          const int64_t dst = ((page * KV + g) * P + j % P) * D;
          std::copy_n(kk.data<float>() + (j * KV + g) * D, D, c.cache.k.mutable_data<float>() + dst);
          std::copy_n(vv.data<float>() + (j * KV + g) * D, D, c.cache.v.mutable_data<float>() + dst);
        }
      // The reference: the same keys in a contiguous cache.
      k::KVCacheView view{Tensor::empty({KV, s.len, D}, DType::kF32), Tensor::empty({KV, s.len, D}, DType::kF32), 0};
      k::kv_cache_append(view, kk, vv);
      std::vector<int64_t> positions;
      for (int64_t i = 0; i < s.queries; ++i) {
        positions.push_back(s.len - s.queries + i);
        pos.push_back(static_cast<int32_t>(s.len - s.queries + i));
        token_seq.push_back(static_cast<int32_t>(b));
      }
      if (s.queries > 0) {
        Tensor y = c.expected.slice_rows(row, row + s.queries);
        k::attention(c.q.slice_rows(row, row + s.queries), positions, view, spec, y);
      }
      row += s.queries;
      query_start.push_back(static_cast<int32_t>(row));
      lens.push_back(static_cast<int32_t>(s.len));
    }
    c.batch.num_seqs = B;
    c.batch.num_tokens = tokens;
    c.batch.max_query_len = max_q;
    c.batch.max_seq_len = max_len;
    c.batch.query_start = i32(query_start, {B + 1});
    c.batch.seq_lens = i32(lens, {B});
    c.batch.positions = i32(pos, {tokens});
    c.batch.token_seq = i32(token_seq, {tokens});
    c.batch.block_table = i32(table, {B, max_pages + 1});
    return c;
  }

  static void expect_same(const Case& c, const std::string& what) {
    Tensor out = Tensor::empty(c.q.shape(), DType::kF32);
    std::fill_n(out.mutable_data<float>(), out.numel(), std::numeric_limits<float>::quiet_NaN());
    EXPECT_EQ(k::paged_attention_scratch_elems(c.batch, c.spec, Device::cpu()), 0);
    k::paged_attention(c.q, c.batch, c.cache, c.spec, out, nullptr);
    const float* a = out.data<float>();
    const float* e = c.expected.data<float>();
    int64_t bad = 0;
    for (int64_t i = 0; i < out.numel(); ++i)
      if (!(a[i] == e[i]) && bad++ < 5)
        ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << e[i];
    EXPECT_EQ(bad, 0) << what;
  }
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
  return std::string(dtype_name(s.dtype)) + " dim " + std::to_string(s.head_dim) + " gqa " +
         std::to_string(s.heads / s.kv_heads) +
         (s.sliding_window ? " window " + std::to_string(*s.sliding_window) : "");
}

TEST_F(PagedAttentionTest, RaggedPrefillMatchesContiguousCache) {
  // Whole prompts (1, 64, 70 tokens), chunks after a cached prefix (5 of 130,
  // 17 of 200), and a sequence with no tokens this step.
  const std::vector<SeqShape> seqs = {{70, 70}, {1, 1}, {130, 5}, {64, 64}, {9, 0}, {200, 17}};
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int64_t dim : {64, 128})
      for (int64_t ratio : {1, 2, 4, 8})
        for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{37}}) {
          const k::AttentionSpec spec = make_spec(8, ratio, dim, window, dt);
          expect_same(build(spec, seqs), "prefill " + describe(spec));
        }
}

TEST_F(PagedAttentionTest, DecodeMatchesContiguousCache) {
  // One query per sequence, lengths around page boundaries and long ones.
  const std::vector<SeqShape> seqs = {{1, 1}, {63, 1}, {64, 1}, {65, 1}, {300, 1}, {1000, 1}};
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int64_t dim : {64, 128})
      for (int64_t ratio : {1, 2, 4, 8})
        for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{100}}) {
          const k::AttentionSpec spec = make_spec(8, ratio, dim, window, dt);
          expect_same(build(spec, seqs), "decode " + describe(spec));
        }
}

TEST_F(PagedAttentionTest, OddHeadDimAndEmptyBatch) {
  const k::AttentionSpec spec = make_spec(6, 3, 80, std::nullopt, DType::kF32);
  expect_same(build(spec, {{150, 150}, {77, 3}}), "dim 80");
  // No tokens at all: nothing to do, no error.
  Case c = build(spec, {{5, 0}});
  Tensor out = Tensor::empty({0, 6 * 80}, DType::kF32);
  k::paged_attention(c.q, c.batch, c.cache, c.spec, out, nullptr);
}

TEST_F(PagedAttentionTest, RejectsBadArguments) {
  const k::AttentionSpec spec = make_spec(4, 2, 64, std::nullopt, DType::kF32);
  auto expect_invalid = [&](const std::string& what, auto mutate) {
    Case c = build(spec, {{70, 3}, {10, 1}});
    Tensor out = Tensor::empty(c.q.shape(), DType::kF32);
    mutate(c, out);
    const auto [kind, message] = error_of([&] { k::paged_attention(c.q, c.batch, c.cache, c.spec, out, nullptr); });
    EXPECT_EQ(kind, ErrorKind::kInvalidInput) << what << ": " << message;
    EXPECT_NE(message.find("paged_attention"), std::string::npos) << what << ": " << message;
  };
  expect_invalid("eager", [](Case& c, Tensor&) { c.spec.eager = true; });
  expect_invalid("heads", [](Case& c, Tensor&) { c.spec.kv_heads = 3; });
  expect_invalid("window", [](Case& c, Tensor&) { c.spec.sliding_window = 0; });
  expect_invalid("q shape", [](Case& c, Tensor&) { c.q = c.q.slice_rows(0, 3); });
  expect_invalid("out shape", [](Case&, Tensor& out) { out = out.slice_rows(0, 2); });
  expect_invalid("pool shape", [](Case& c, Tensor&) {
    c.cache.k = c.cache.k.reshape({c.cache.k.size(0), 2, 32, 128});
  });
  expect_invalid("pool mismatch", [](Case& c, Tensor&) { c.cache.v = c.cache.v.slice_rows(0, 1); });
  expect_invalid("pool dtype", [](Case& c, Tensor&) { c.cache.v = c.cache.v.to(DType::kBF16); });
  expect_invalid("I64 table", [](Case& c, Tensor&) { c.batch.block_table = c.batch.block_table.to(DType::kI64); });
  expect_invalid("I64 seq_lens", [](Case& c, Tensor&) { c.batch.seq_lens = c.batch.seq_lens.to(DType::kI64); });
  expect_invalid("query_start size", [](Case& c, Tensor&) { c.batch.query_start = c.batch.seq_lens; });
  expect_invalid("table rows", [](Case& c, Tensor&) { c.batch.block_table = c.batch.block_table.slice_rows(0, 1); });
  expect_invalid("no max_query_len", [](Case& c, Tensor&) { c.batch.max_query_len = 0; });
  expect_invalid("max_query_len too small", [](Case& c, Tensor&) { c.batch.max_query_len = 2; });
  expect_invalid("max_seq_len too small", [](Case& c, Tensor&) { c.batch.max_seq_len = 64; });
  expect_invalid("max_seq_len beyond table", [](Case& c, Tensor&) { c.batch.max_seq_len = 1000; });
  expect_invalid("page out of pool", [](Case& c, Tensor&) { c.batch.block_table.mutable_data<int32_t>()[1] = 99; });
  expect_invalid("unmapped page", [](Case& c, Tensor&) { c.batch.block_table.mutable_data<int32_t>()[0] = -1; });
  expect_invalid("query_start", [](Case& c, Tensor&) { c.batch.query_start.mutable_data<int32_t>()[2] = 5; });
  expect_invalid("short sequence", [](Case& c, Tensor&) { c.batch.seq_lens.mutable_data<int32_t>()[1] = 0; });
  expect_invalid("position", [](Case& c, Tensor&) { c.batch.positions.mutable_data<int32_t>()[0] = 3; });
  expect_invalid("token_seq", [](Case& c, Tensor&) { c.batch.token_seq.mutable_data<int32_t>()[3] = 0; });
}

}  // namespace
}  // namespace hipformers::testing
