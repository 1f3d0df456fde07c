// The fused decode ops on the CPU against the unfused ops they replace:
// qkv_rope_write (rms_norm + apply_rope + paged cache write) bit for bit,
// silu_and_mul_packed against silu_and_mul, embedding with tensor ids against
// the span overload, argmax_rows against the host argmax; and their argument
// errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/kernels/activation.h"
#include "hipformers/kernels/embedding.h"
#include "hipformers/kernels/linear.h"
#include "hipformers/kernels/logits.h"
#include "hipformers/kernels/paged_attention.h"
#include "hipformers/kernels/qkv_rope.h"
#include "hipformers/kernels/rms_norm.h"
#include "hipformers/kernels/rotary.h"
#include "test_random.h"

namespace hipformers {
namespace {

namespace k = hipformers::kernels;
using testing::RandomTest;
using FusedOps = RandomTest;

Tensor i32(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kI32);
  std::memcpy(t.mutable_data<int32_t>(), v.data(), v.size() * sizeof(int32_t));
  return t;
}
Tensor i32(const std::vector<int32_t>& v) { return i32(v, Shape{static_cast<int64_t>(v.size())}); }

Tensor f32(const std::vector<float>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::kF32);
  std::memcpy(t.mutable_data<float>(), v.data(), v.size() * sizeof(float));
  return t;
}

Tensor rounded(const Tensor& t, DType dtype) { return t.to(dtype).to(DType::kF32); }

void expect_bits_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  int64_t bad = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0 && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << x[i] << ", expected " << y[i];
  EXPECT_EQ(bad, 0) << what;
}

// Columns [begin, begin + width) of every row of a [rows, cols] tensor.
Tensor columns(const Tensor& t, int64_t begin, int64_t width) {
  const int64_t rows = t.size(0), cols = t.size(1);
  Tensor out = Tensor::empty({rows, width}, DType::kF32);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.mutable_data<float>() + r * width, t.data<float>() + r * cols + begin,
                static_cast<std::size_t>(width) * sizeof(float));
  return out;
}

// A step of 6 tokens from 3 sequences at scattered positions; pages shuffled.
struct Step {
  std::vector<int32_t> seq_of = {0, 1, 1, 2, 2, 2};
  std::vector<int32_t> pos = {130, 5, 6, 63, 64, 200};
  int64_t max_pages = 4, num_pages = 12;
  std::vector<int32_t> table;  // [3, max_pages]
  k::PagedBatch batch;
};

Step make_step(std::mt19937& rng) {
  Step s;
  std::vector<int32_t> pages(static_cast<std::size_t>(s.num_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  s.table.assign(pages.begin(), pages.begin() + 3 * s.max_pages);
  s.batch.num_seqs = 3;
  s.batch.num_tokens = static_cast<int64_t>(s.pos.size());
  s.batch.max_query_len = 3;
  s.batch.max_seq_len = 201;
  s.batch.query_start = i32({0, 1, 3, 6});
  s.batch.seq_lens = i32({131, 7, 201});
  s.batch.positions = i32(s.pos);
  s.batch.token_seq = i32(s.seq_of);
  s.batch.block_table = i32(s.table, Shape{3, s.max_pages});
  return s;
}

TEST_F(FusedOps, QkvRopeWriteEqualsUnfusedOpsBitForBit) {
  k::RopeSpec plain;
  plain.theta = 1000000.0;
  k::RopeSpec yarn = plain;
  yarn.kind = k::RopeSpec::kYarn;
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 64;
  yarn.max_position_embeddings = 256;
  yarn.yarn_attention_factor = 1.1;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (int64_t D : {64, 128})
      for (bool norm : {true, false})
        for (bool use_yarn : {false, true})
          for (auto [heads, kv_heads] : {std::pair<int64_t, int64_t>{4, 2}, {3, 3}, {8, 1}}) {
            const std::string what = std::string(dtype_name(dt)) + " D " + std::to_string(D) +
                                     (norm ? " norm" : "") + (use_yarn ? " yarn" : "") + " heads " +
                                     std::to_string(heads) + "/" + std::to_string(kv_heads);
            k::RopeSpec spec = use_yarn ? yarn : plain;
            spec.head_dim = D;
            const k::RopeFrequencies freqs = k::rope_frequencies(spec);
            Step s = make_step(rng_);
            const int64_t T = s.batch.num_tokens;
            Tensor qkv = rounded(random({T, (heads + 2 * kv_heads) * D}, 3.0f), dt);
            Tensor q_norm = norm ? rounded(random({D}), dt) : Tensor();
            Tensor k_norm = norm ? rounded(random({D}), dt) : Tensor();
            Tensor pool_k = random({s.num_pages, kv_heads, k::kKVPageSize, D});
            Tensor pool_v = random({s.num_pages, kv_heads, k::kKVPageSize, D});

            // Unfused: per-head norms, rope over all heads, then the cache writes.
            std::vector<int64_t> pos64(s.pos.begin(), s.pos.end());
            Tensor q = columns(qkv, 0, heads * D), kk = columns(qkv, heads * D, kv_heads * D);
            Tensor v = columns(qkv, (heads + kv_heads) * D, kv_heads * D);
            if (norm) {
              Tensor qn = Tensor::empty(q.shape(), DType::kF32), kn = Tensor::empty(kk.shape(), DType::kF32);
              k::rms_norm(q.reshape({T * heads, D}), q_norm, 1e-6, dt, qn);
              k::rms_norm(kk.reshape({T * kv_heads, D}), k_norm, 1e-6, dt, kn);
              q = qn;
              kk = kn;
            }
            k::apply_rope(q, heads, pos64, freqs, dt);
            k::apply_rope(kk, kv_heads, pos64, freqs, dt);
            Tensor want_k = pool_k.clone(), want_v = pool_v.clone();
            for (int64_t t = 0; t < T; ++t) {
              const int64_t p = s.pos[static_cast<std::size_t>(t)];
              const int64_t page = s.table[static_cast<std::size_t>(s.seq_of[static_cast<std::size_t>(t)] * s.max_pages +
                                                                    p / k::kKVPageSize)];
              for (int64_t h = 0; h < kv_heads; ++h) {
                const int64_t dst = ((page * kv_heads + h) * k::kKVPageSize + p % k::kKVPageSize) * D;
                std::memcpy(want_k.mutable_data<float>() + dst, kk.data<float>() + (t * kv_heads + h) * D,
                            static_cast<std::size_t>(D) * sizeof(float));
                std::memcpy(want_v.mutable_data<float>() + dst, v.data<float>() + (t * kv_heads + h) * D,
                            static_cast<std::size_t>(D) * sizeof(float));
              }
            }

            k::PagedKVLayer cache{pool_k.clone(), pool_v.clone()};
            Tensor q_out = Tensor::empty({T, heads * D}, DType::kF32);
            k::qkv_rope_write(qkv, q_norm, k_norm, 1e-6, f32(freqs.inv_freq), freqs.attention_scaling, s.batch, heads,
                              kv_heads, dt, cache, q_out);
            expect_bits_equal(q_out, q, what + " q");
            expect_bits_equal(cache.k, want_k, what + " k pool");
            expect_bits_equal(cache.v, want_v, what + " v pool");
          }
}

TEST_F(FusedOps, QkvRopeWriteRejectsBadArguments) {
  const int64_t heads = 4, kv_heads = 2, D = 64;
  Step s = make_step(rng_);
  const int64_t T = s.batch.num_tokens;
  Tensor qkv = random({T, (heads + 2 * kv_heads) * D});
  Tensor norm_w = random({D});
  Tensor inv_freq = f32(k::rope_frequencies(k::RopeSpec{.head_dim = D}).inv_freq);
  auto run = [&](k::PagedBatch batch, const Tensor& x, const Tensor& qn, const Tensor& kn, const Tensor& freq,
                 int64_t h, int64_t kvh, Shape pool_shape, Shape out_shape) {
    k::PagedKVLayer cache{Tensor::zeros(pool_shape, DType::kF32), Tensor::zeros(pool_shape, DType::kF32)};
    Tensor q_out = Tensor::empty(out_shape, DType::kF32);
    k::qkv_rope_write(x, qn, kn, 1e-6, freq, 1.0f, batch, h, kvh, DType::kBF16, cache, q_out);
  };
  const Shape pool{s.num_pages, kv_heads, k::kKVPageSize, D}, out{T, heads * D};
  EXPECT_NO_THROW(run(s.batch, qkv, norm_w, norm_w, inv_freq, heads, kv_heads, pool, out));
  EXPECT_THROW(run(s.batch, qkv, norm_w, Tensor(), inv_freq, heads, kv_heads, pool, out), Error);  // q_norm only
  EXPECT_THROW(run(s.batch, qkv, random({D + 2}), random({D + 2}), inv_freq, heads, kv_heads, pool, out), Error);
  EXPECT_THROW(run(s.batch, random({T, 7 * D}), Tensor(), Tensor(), inv_freq, heads, kv_heads, pool, out), Error);
  EXPECT_THROW(run(s.batch, qkv, Tensor(), Tensor(), random({D}), heads, kv_heads, pool, out), Error);
  EXPECT_THROW(run(s.batch, qkv, Tensor(), Tensor(), inv_freq, heads, kv_heads,
                   Shape{s.num_pages, kv_heads, 32, D}, out), Error);  // not a 64-token page
  EXPECT_THROW(run(s.batch, qkv, Tensor(), Tensor(), inv_freq, heads, kv_heads, pool, Shape{T, 3 * D}), Error);
  EXPECT_THROW(run(s.batch, qkv, Tensor(), Tensor(), inv_freq, 0, kv_heads, pool, out), Error);
  {
    k::PagedBatch b = s.batch;
    b.positions = Tensor::zeros({T}, DType::kI64);  // index tensors are I32
    EXPECT_THROW(run(b, qkv, Tensor(), Tensor(), inv_freq, heads, kv_heads, pool, out), Error);
  }
  {
    k::PagedBatch b = s.batch;
    std::vector<int32_t> pos = s.pos;
    pos[2] = static_cast<int32_t>(s.max_pages * k::kKVPageSize);  // past the block table
    b.positions = i32(pos);
    EXPECT_THROW(run(b, qkv, Tensor(), Tensor(), inv_freq, heads, kv_heads, pool, out), Error);
    pos[2] = -1;
    b.positions = i32(pos);
    EXPECT_THROW(run(b, qkv, Tensor(), Tensor(), inv_freq, heads, kv_heads, pool, out), Error);
  }
  {
    k::PagedBatch b = s.batch;
    std::vector<int32_t> seq = s.seq_of;
    seq[0] = 3;
    b.token_seq = i32(seq);
    EXPECT_THROW(run(b, qkv, Tensor(), Tensor(), inv_freq, heads, kv_heads, pool, out), Error);
  }
  {
    k::PagedBatch b = s.batch;
    std::vector<int32_t> table = s.table;
    table[static_cast<std::size_t>(2 * s.max_pages)] = static_cast<int32_t>(s.num_pages);  // seq 2, page 0
    b.block_table = i32(table, Shape{3, s.max_pages});
    try {
      run(b, qkv, Tensor(), Tensor(), inv_freq, heads, kv_heads, pool, out);
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("page 12"), std::string::npos) << e.what();
    }
  }
}

TEST_F(FusedOps, SiluAndMulPackedEqualsSiluAndMul) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (auto [N, I] : {std::pair<int64_t, int64_t>{1, 1}, {3, 67}, {5, 3072}}) {
      Tensor gu = rounded(random({N, 2 * I}, 6.0f), dt);
      Tensor gate = columns(gu, 0, I), up = columns(gu, I, I);
      Tensor want = Tensor::empty({N, I}, DType::kF32), got = Tensor::empty({N, I}, DType::kF32);
      k::silu_and_mul(gate, up, dt, want);
      k::silu_and_mul_packed(gu, dt, got);
      expect_bits_equal(got, want, std::string("silu_and_mul_packed ") + dtype_name(dt));
    }
  Tensor out = Tensor::empty({2, 4}, DType::kF32);
  EXPECT_THROW(k::silu_and_mul_packed(random({2, 9}), DType::kF32, out), Error);
  EXPECT_THROW(k::silu_and_mul_packed(random({4, 4}), DType::kF32, out), Error);  // [N, 2I] needs 8 columns
}

TEST_F(FusedOps, EmbeddingByTensorIdsEqualsSpanIds) {
  Tensor w = random({50, 33});
  std::vector<int32_t> ids = {7, 0, 49, 7, 12};
  Tensor want = Tensor::empty({5, 33}, DType::kF32), got = Tensor::empty({5, 33}, DType::kF32);
  k::embedding(w, ids, want);
  k::embedding(w, i32(ids), got);
  expect_bits_equal(got, want, "embedding");
  // A row gather from activations: the last token of each of two sequences.
  Tensor hidden = random({6, 16}), last = Tensor::empty({2, 16}, DType::kF32);
  k::embedding(hidden, i32({2, 5}), last);
  EXPECT_EQ(0, std::memcmp(last.data<float>(), hidden.data<float>() + 2 * 16, 16 * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(last.data<float>() + 16, hidden.data<float>() + 5 * 16, 16 * sizeof(float)));

  Tensor two_rows = want.slice_rows(0, 2);
  try {
    k::embedding(w, i32({1, 50}), two_rows);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 50 at position 1"), std::string::npos) << e.what();
  }
  Tensor out2 = Tensor::empty({2, 33}, DType::kF32);
  EXPECT_THROW(k::embedding(w, i32({-1, 0}), out2), Error);
  EXPECT_THROW(k::embedding(w, Tensor::zeros({2}, DType::kI64), out2), Error);  // ids must be I32
  EXPECT_THROW(k::embedding(w, i32({1, 2, 3}), out2), Error);                   // output too small
}

// The CPU fused_linear is the unfused ops in sequence: same bits.
TEST_F(FusedOps, FusedLinearEqualsUnfusedOps) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const int64_t rows = 3, in = 40, out = 24;
    Tensor x = random({rows, in}), w = random({out, in}, 0.2f), b = random({out}), nw = random({in}, 0.3f);
    Tensor gu = random({rows, 2 * in}), res = random({rows, out});
    // norm input
    Tensor normed = Tensor::empty({rows, in}, DType::kF32), want = Tensor::empty({rows, out}, DType::kF32);
    k::rms_norm(x, nw, 1e-6, dt, normed);
    k::linear(normed, w, b, dt, want);
    Tensor got = Tensor::empty({rows, out}, DType::kF32);
    k::LinearFusion f;
    f.norm_weight = &nw;
    f.eps = 1e-6;
    k::fused_linear(x, w, b, dt, f, got);
    EXPECT_EQ(std::memcmp(got.data<float>(), want.data<float>(), want.nbytes()), 0);
    // norm input + SwiGLU output + residual (add_rms_norm's residual update)
    Tensor wgu = random({2 * out, in}, 0.2f), bgu = random({2 * out});
    Tensor gate_up = Tensor::empty({rows, 2 * out}, DType::kF32);
    k::linear(normed, wgu, bgu, dt, gate_up);
    k::silu_and_mul_packed(gate_up, dt, want);
    Tensor want_res = res.clone(), normed2 = Tensor::empty({rows, out}, DType::kF32);
    Tensor ones = Tensor::empty({out}, DType::kF32);
    std::fill_n(ones.mutable_data<float>(), out, 1.0f);
    k::add_rms_norm(want, want_res, ones, 1e-6, dt, normed2);
    k::LinearFusion g = f;
    g.swiglu_output = true;
    Tensor got_res = res.clone();
    g.residual = &got_res;
    k::fused_linear(x, wgu, bgu, dt, g, got);
    EXPECT_EQ(std::memcmp(got.data<float>(), want.data<float>(), want.nbytes()), 0);
    EXPECT_EQ(std::memcmp(got_res.data<float>(), want_res.data<float>(), want_res.nbytes()), 0);
    // bad arguments
    EXPECT_THROW(k::fused_linear(gu, w, b, dt, f, got), Error);  // rows of 2*in for a norm input
    Tensor odd = random({2 * out + 1, in});
    EXPECT_THROW(k::fused_linear(x, odd, Tensor(), dt, g, got), Error);  // a [gate; up] weight has even rows
    EXPECT_THROW(k::fused_linear(x, wgu, bgu, dt, f, got), Error);       // without swiglu the output is 2 * out wide
  }
}

TEST_F(FusedOps, ArgmaxRowsEqualsHostArgmax) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t V = 1000;
  std::vector<std::vector<float>> rows;
  for (int r = 0; r < 3; ++r) {
    Tensor t = random({V});
    rows.emplace_back(t.data<float>(), t.data<float>() + V);
  }
  rows[1][10] = rows[1][900] = 5.0f;  // tie: the first wins
  rows.emplace_back(static_cast<std::size_t>(V), -inf);  // all -inf: 0
  std::vector<float> tie_zero(static_cast<std::size_t>(V), -1.0f);
  tie_zero[3] = -0.0f;
  tie_zero[2] = 0.0f;  // +0 and -0 equal: index 2
  rows.push_back(tie_zero);
  std::vector<float> with_nan = rows[0];
  with_nan[400] = nan;
  with_nan[700] = nan;  // the first NaN wins
  rows.push_back(with_nan);
  std::vector<float> neg(static_cast<std::size_t>(V), -3.0f);
  neg[999] = -2.0f;
  neg[0] = -inf;
  rows.push_back(neg);

  const auto B = static_cast<int64_t>(rows.size());
  Tensor logits = Tensor::empty({B, V}, DType::kF32);
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(logits.mutable_data<float>() + b * V, rows[static_cast<std::size_t>(b)].data(), V * sizeof(float));
  Tensor ids = Tensor::empty({B}, DType::kI32);
  k::argmax_rows(logits, ids);
  for (int64_t b = 0; b < B; ++b)
    EXPECT_EQ(ids.data<int32_t>()[b], k::argmax(rows[static_cast<std::size_t>(b)])) << "row " << b;
  EXPECT_EQ(ids.data<int32_t>()[1], 10);
  EXPECT_EQ(ids.data<int32_t>()[3], 0);
  EXPECT_EQ(ids.data<int32_t>()[4], 2);
  EXPECT_EQ(ids.data<int32_t>()[5], 400);
  EXPECT_EQ(ids.data<int32_t>()[6], 999);

  Tensor i64_ids = Tensor::empty({B}, DType::kI64);
  EXPECT_THROW(k::argmax_rows(logits, i64_ids), Error);
  Tensor short_ids = Tensor::empty({B - 1}, DType::kI32);
  EXPECT_THROW(k::argmax_rows(logits, short_ids), Error);
  Tensor empty_rows = Tensor::empty({2, 0}, DType::kF32), two = Tensor::empty({2}, DType::kI32);
  EXPECT_THROW(k::argmax_rows(empty_rows, two), Error);
}

}  // namespace
}  // namespace hipformers
