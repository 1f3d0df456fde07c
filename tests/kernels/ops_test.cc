// Every kernel against a naive double-precision reference on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/kernels/activation.h"
#include "hipformers/kernels/attention.h"
#include "hipformers/kernels/embedding.h"
#include "hipformers/kernels/linear.h"
#include "hipformers/kernels/logits.h"
#include "hipformers/kernels/rms_norm.h"
#include "test_random.h"

namespace hipformers {
namespace {

using testing::RandomTest;
using Kernels = RandomTest;

void expect_close(const float* got, const std::vector<double>& want, double rel, const char* what) {
  double max_ref = 0;
  for (double w : want) max_ref = std::max(max_ref, std::abs(w));
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * std::max(max_ref, 1e-30)) << what << " element " << i;
}

TEST_F(Kernels, EmbeddingGathersRowsAndRejectsBadIds) {
  Tensor w = random({7, 5});
  std::vector<int32_t> ids = {3, 0, 6, 3};
  Tensor out = Tensor::empty({4, 5}, DType::kF32);
  kernels::embedding(w, ids, out);
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 5; ++i) EXPECT_EQ(out.data<float>()[t * 5 + i], w.data<float>()[ids[t] * 5 + i]);
  std::vector<int32_t> bad = {1, 7};
  Tensor out2 = Tensor::empty({2, 5}, DType::kF32);
  try {
    kernels::embedding(w, bad, out2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 7"), std::string::npos) << e.what();
  }
  Tensor dw = Tensor::zeros({7, 5}, DType::kF32);
  kernels::embedding_backward(out, ids, dw);
  EXPECT_FLOAT_EQ(dw.data<float>()[3 * 5 + 2], 2 * w.data<float>()[3 * 5 + 2]);
  EXPECT_EQ(dw.data<float>()[1 * 5], 0.0f);
}

std::vector<double> rms_norm_ref(const Tensor& x, const Tensor& w, double eps) {
  const int64_t H = w.numel(), rows = x.numel() / H;
  std::vector<double> y(static_cast<std::size_t>(x.numel()));
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) ss += std::pow(x.data<float>()[r * H + i], 2);
    double inv = 1 / std::sqrt(ss / H + eps);
    for (int64_t i = 0; i < H; ++i) y[static_cast<std::size_t>(r * H + i)] = w.data<float>()[i] * x.data<float>()[r * H + i] * inv;
  }
  return y;
}

TEST_F(Kernels, RmsNormMatchesReference) {
  Tensor x = random({6, 96}, 3.0f), w = random({96});
  Tensor y = Tensor::empty({6, 96}, DType::kF32), rstd = Tensor::empty({6}, DType::kF32);
  kernels::rms_norm(x, w, 1e-6, DType::kF32, y, &rstd);
  expect_close(y.data<float>(), rms_norm_ref(x, w, 1e-6), 1e-6, "rms_norm");
  // bf16: every output is a bf16 value and within bf16 precision of the reference.
  kernels::rms_norm(x, w, 1e-6, DType::kBF16, y);
  auto ref = rms_norm_ref(x, w, 1e-6);
  for (int64_t i = 0; i < y.numel(); ++i) {
    float v = y.data<float>()[i];
    ASSERT_EQ(v, round_to_dtype(v, DType::kBF16));
    ASSERT_NEAR(v, ref[static_cast<std::size_t>(i)], 2 * std::ldexp(std::abs(ref[static_cast<std::size_t>(i)]), -8) + 1e-6);
  }
}

TEST_F(Kernels, AddRmsNormUpdatesResidual) {
  Tensor x = random({4, 32}), residual = random({4, 32}), w = random({32});
  std::vector<float> sum(128);
  for (int i = 0; i < 128; ++i) sum[static_cast<std::size_t>(i)] = x.data<float>()[i] + residual.data<float>()[i];
  Tensor y = Tensor::empty({4, 32}, DType::kF32);
  kernels::add_rms_norm(x, residual, w, 1e-5, DType::kF32, y);
  for (int i = 0; i < 128; ++i) ASSERT_EQ(residual.data<float>()[i], sum[static_cast<std::size_t>(i)]);
  expect_close(y.data<float>(), rms_norm_ref(residual, w, 1e-5), 1e-6, "add_rms_norm");
}

TEST_F(Kernels, RmsNormBackwardMatchesFiniteDifferences) {
  const int H = 8;
  Tensor x = random({2, H}), w = random({H}), dy = random({2, H});
  Tensor y = Tensor::empty({2, H}, DType::kF32), rstd = Tensor::empty({2}, DType::kF32);
  kernels::rms_norm(x, w, 1e-6, DType::kF32, y, &rstd);
  Tensor dx = Tensor::empty({2, H}, DType::kF32), dw = Tensor::zeros({H}, DType::kF32);
  kernels::rms_norm_backward(dy, x, w, rstd, dx, dw);
  auto loss = [&](const Tensor& xx, const Tensor& ww) {
    auto out = rms_norm_ref(xx, ww, 1e-6);
    double l = 0;
    for (std::size_t i = 0; i < out.size(); ++i) l += out[i] * dy.data<float>()[i];
    return l;
  };
  const float h = 1e-3f;
  for (int i = 0; i < 2 * H; ++i) {
    Tensor xp = x.clone(), xm = x.clone();
    xp.mutable_data<float>()[i] += h;
    xm.mutable_data<float>()[i] -= h;
    double fd = (loss(xp, w) - loss(xm, w)) / (static_cast<double>(xp.data<float>()[i]) - xm.data<float>()[i]);
    ASSERT_NEAR(dx.data<float>()[i], fd, 2e-3 * std::max(1.0, std::abs(fd))) << "dx " << i;
  }
  for (int i = 0; i < H; ++i) {
    Tensor wp = w.clone(), wm = w.clone();
    wp.mutable_data<float>()[i] += h;
    wm.mutable_data<float>()[i] -= h;
    double fd = (loss(x, wp) - loss(x, wm)) / (static_cast<double>(wp.data<float>()[i]) - wm.data<float>()[i]);
    ASSERT_NEAR(dw.data<float>()[i], fd, 2e-3 * std::max(1.0, std::abs(fd))) << "dw " << i;
  }
}

TEST_F(Kernels, LinearMatchesReferenceWithAndWithoutBias) {
  const int rows = 5, in = 37, out = 19;
  Tensor x = random({rows, in}), w = random({out, in}), b = random({out});
  for (bool with_bias : {false, true}) {
    Tensor y = Tensor::empty({rows, out}, DType::kF32);
    kernels::linear(x, w, with_bias ? b : Tensor(), DType::kF32, y);
    std::vector<double> ref(rows * out);
    for (int r = 0; r < rows; ++r)
      for (int o = 0; o < out; ++o) {
        double acc = with_bias ? b.data<float>()[o] : 0.0;
        for (int i = 0; i < in; ++i) acc += static_cast<double>(x.data<float>()[r * in + i]) * w.data<float>()[o * in + i];
        ref[static_cast<std::size_t>(r * out + o)] = acc;
      }
    expect_close(y.data<float>(), ref, 1e-6, "linear");
  }
  Tensor bad = Tensor::empty({rows, out + 1}, DType::kF32);
  EXPECT_THROW(kernels::linear(x, w, Tensor(), DType::kF32, bad), Error);
}

TEST_F(Kernels, LinearBackwardMatchesReference) {
  const int rows = 3, in = 6, out = 4;
  Tensor x = random({rows, in}), w = random({out, in}), dy = random({rows, out});
  Tensor dx = Tensor::empty({rows, in}, DType::kF32), dw = Tensor::zeros({out, in}, DType::kF32),
         db = Tensor::zeros({out}, DType::kF32);
  kernels::linear_backward(dy, x, w, dx, dw, db);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < in; ++i) {
      double acc = 0;
      for (int o = 0; o < out; ++o) acc += static_cast<double>(dy.data<float>()[r * out + o]) * w.data<float>()[o * in + i];
      ASSERT_NEAR(dx.data<float>()[r * in + i], acc, 1e-5);
    }
  for (int o = 0; o < out; ++o) {
    double bsum = 0;
    for (int r = 0; r < rows; ++r) bsum += dy.data<float>()[r * out + o];
    ASSERT_NEAR(db.data<float>()[o], bsum, 1e-5);
    for (int i = 0; i < in; ++i) {
      double acc = 0;
      for (int r = 0; r < rows; ++r) acc += static_cast<double>(dy.data<float>()[r * out + o]) * x.data<float>()[r * in + i];
      ASSERT_NEAR(dw.data<float>()[o * in + i], acc, 1e-5);
    }
  }
}

TEST_F(Kernels, SiluAndMulForwardAndBackward) {
  Tensor g = random({3, 50}, 6.0f), u = random({3, 50});
  Tensor y = Tensor::empty({3, 50}, DType::kF32);
  kernels::silu_and_mul(g, u, DType::kF32, y);
  std::vector<double> ref(150);
  for (int i = 0; i < 150; ++i) {
    double gv = g.data<float>()[i];
    ref[static_cast<std::size_t>(i)] = gv / (1 + std::exp(-gv)) * u.data<float>()[i];
  }
  expect_close(y.data<float>(), ref, 1e-6, "silu_and_mul");
  Tensor dy = random({3, 50}), dg = Tensor::empty({3, 50}, DType::kF32), du = Tensor::empty({3, 50}, DType::kF32);
  kernels::silu_and_mul_backward(dy, g, u, dg, du);
  for (int i = 0; i < 150; ++i) {
    double gv = g.data<float>()[i], h = 1e-4;
    auto f = [](double z) { return z / (1 + std::exp(-z)); };
    double d = (f(gv + h) - f(gv - h)) / (2 * h);
    ASSERT_NEAR(dg.data<float>()[i], dy.data<float>()[i] * u.data<float>()[i] * d, 1e-4);
    ASSERT_NEAR(du.data<float>()[i], dy.data<float>()[i] * f(gv), 1e-5);
  }
}

// Naive attention in double over full [T, S] score matrices.
std::vector<double> attention_ref(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                  int T, int S, int H, int KV, int D, std::optional<int> window, int first_pos) {
  std::vector<double> out(static_cast<std::size_t>(T * H * D), 0.0);
  for (int h = 0; h < H; ++h)
    for (int t = 0; t < T; ++t) {
      int pos = first_pos + t, kvh = h / (H / KV);
      std::vector<double> s(S, -INFINITY);
      double mx = -INFINITY;
      for (int j = 0; j < S; ++j) {
        if (j > pos || (window && pos - j >= *window)) continue;
        double dot = 0;
        for (int i = 0; i < D; ++i) dot += static_cast<double>(q[(t * H + h) * D + i]) * k[(j * KV + kvh) * D + i];
        s[j] = dot / std::sqrt(static_cast<double>(D));
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int j = 0; j < S; ++j) sum += std::exp(s[j] - mx);
      for (int j = 0; j < S; ++j) {
        double p = std::exp(s[j] - mx) / sum;
        for (int i = 0; i < D; ++i) out[static_cast<std::size_t>((t * H + h) * D + i)] += p * v[(j * KV + kvh) * D + i];
      }
    }
  return out;
}

struct AttnCase {
  int heads, kv_heads;
  std::optional<int> window;
};

class AttentionTest : public RandomTest, public ::testing::WithParamInterface<AttnCase> {};

TEST_P(AttentionTest, EagerAndSdpaMatchReferenceThroughTheCache) {
  const AttnCase c = GetParam();
  const int D = 16, T1 = 7, T2 = 5, S = T1 + T2;
  Tensor k_all = random({S, c.kv_heads * D}, 2.0f), v_all = random({S, c.kv_heads * D});
  Tensor q_all = random({S, c.heads * D}, 2.0f);
  std::vector<float> q(q_all.data<float>(), q_all.data<float>() + q_all.numel());
  std::vector<float> k(k_all.data<float>(), k_all.data<float>() + k_all.numel());
  std::vector<float> v(v_all.data<float>(), v_all.data<float>() + v_all.numel());
  auto ref = attention_ref(q, k, v, S, S, c.heads, c.kv_heads, D, c.window, 0);
  for (bool eager : {true, false}) {
    kernels::KVCacheView cache{Tensor::empty({c.kv_heads, 20, D}, DType::kF32),
                               Tensor::empty({c.kv_heads, 20, D}, DType::kF32), 0};
    kernels::AttentionSpec spec{c.heads, c.kv_heads, D, 1.0f / std::sqrt(static_cast<float>(D)),
                                c.window ? std::optional<int64_t>(*c.window) : std::nullopt, DType::kF32, eager};
    Tensor out = Tensor::empty({S, c.heads * D}, DType::kF32);
    // Prefill T1 tokens, then T2 more: the second chunk attends to the cache.
    int64_t done = 0;
    for (int chunk : {T1, T2}) {
      kernels::kv_cache_append(cache, k_all.slice_rows(done, done + chunk), v_all.slice_rows(done, done + chunk));
      std::vector<int64_t> pos(static_cast<std::size_t>(chunk));
      for (int t = 0; t < chunk; ++t) pos[static_cast<std::size_t>(t)] = done + t;
      Tensor o = out.slice_rows(done, done + chunk);
      Tensor probs = Tensor::empty({c.heads, chunk, done + chunk}, DType::kF32);
      kernels::attention(q_all.slice_rows(done, done + chunk), pos, cache, spec, o, eager ? &probs : nullptr);
      if (eager)
        for (int h = 0; h < c.heads; ++h)
          for (int t = 0; t < chunk; ++t) {
            double sum = 0;
            for (int64_t j = 0; j < done + chunk; ++j) {
              float p = probs.data<float>()[(h * chunk + t) * (done + chunk) + j];
              bool visible = j <= done + t && (!c.window || done + t - j < *c.window);
              if (!visible) {
                ASSERT_EQ(p, 0.0f);
              }
              sum += p;
            }
            ASSERT_NEAR(sum, 1.0, 1e-5);
          }
      done += chunk;
    }
    expect_close(out.data<float>(), ref, 1e-5, eager ? "eager" : "sdpa");
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, AttentionTest,
                         ::testing::Values(AttnCase{4, 4, std::nullopt},  // MHA
                                           AttnCase{6, 2, std::nullopt},  // GQA
                                           AttnCase{4, 1, std::nullopt},  // MQA
                                           AttnCase{4, 2, 3}));           // GQA + sliding window

TEST_F(Kernels, AttentionRejectsOverflowAndBadHeads) {
  kernels::KVCacheView cache{Tensor::empty({2, 4, 8}, DType::kF32), Tensor::empty({2, 4, 8}, DType::kF32), 0};
  Tensor k = random({5, 16}), v = random({5, 16});
  EXPECT_THROW(kernels::kv_cache_append(cache, k, v), Error);
  kernels::AttentionSpec spec{3, 2, 8, 0.3f, std::nullopt, DType::kF32, false};
  Tensor q = random({1, 24}), out = Tensor::empty({1, 24}, DType::kF32);
  std::vector<int64_t> pos = {0};
  EXPECT_THROW(kernels::attention(q, pos, cache, spec, out), Error);
}

TEST_F(Kernels, LogitsHelpers) {
  std::vector<float> x(40);
  for (float& v : x) v = next(5.0f);
  std::vector<float> p(40);
  kernels::softmax(x, p);
  double mx = *std::max_element(x.begin(), x.end()), sum = 0;
  for (float v : x) sum += std::exp(v - mx);
  for (int i = 0; i < 40; ++i) ASSERT_NEAR(p[static_cast<std::size_t>(i)], std::exp(x[static_cast<std::size_t>(i)] - mx) / sum, 1e-6);
  std::vector<float> ties = {1, 3, -2, 3, 0};
  EXPECT_EQ(kernels::argmax(ties), 1);
  EXPECT_EQ(kernels::top_k(ties, 3), (std::vector<int64_t>{1, 3, 0}));
  EXPECT_EQ(kernels::top_k(ties, 10).size(), 5u);
}

}  // namespace
}  // namespace hipformers
