// The model against a naive double-precision forward written independently
// here (no kernels), plus cache/eager/sdpa consistency and load errors.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "hipformers/core/error.h"
#include "hipformers/kernels/rotary.h"
#include "hipformers/models/causal_lm.h"
#include "hipformers/runtime/device.h"
#include "model_options.h"
#include "tiny_model.h"

namespace hipformers {
namespace {

using testing::TinySpec;
using testing::TinyWeights;
using Mat = std::vector<double>;  // row-major

struct Naive {
  const TinySpec& s;
  const TinyWeights& w;
  std::vector<double> inv_freq;

  const std::vector<float>& W(const std::string& n) const { return w.at(n).second; }
  Mat linear(const Mat& x, int64_t rows, const std::string& name, int64_t out, int64_t in) const {
    Mat y(static_cast<std::size_t>(rows * out), 0.0);
    const auto& m = W(name + ".weight");
    const std::vector<float>* b = w.count(name + ".bias") ? &W(name + ".bias") : nullptr;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double acc = b ? (*b)[static_cast<std::size_t>(o)] : 0.0;
        for (int64_t i = 0; i < in; ++i) acc += x[static_cast<std::size_t>(r * in + i)] * m[static_cast<std::size_t>(o * in + i)];
        y[static_cast<std::size_t>(r * out + o)] = acc;
      }
    return y;
  }
  Mat norm(const Mat& x, int64_t rows, int64_t n, const std::string& weight) const {
    Mat y(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += x[static_cast<std::size_t>(r * n + i)] * x[static_cast<std::size_t>(r * n + i)];
      double inv = 1 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
      for (int64_t i = 0; i < n; ++i)
        y[static_cast<std::size_t>(r * n + i)] = W(weight)[static_cast<std::size_t>(i)] * x[static_cast<std::size_t>(r * n + i)] * inv;
    }
    return y;
  }
  void rope(Mat& x, int64_t T, int64_t heads) const {
    const int64_t D = s.head_dim, half = D / 2;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          double a = static_cast<double>(t) * inv_freq[static_cast<std::size_t>(i)];
          double& x1 = x[static_cast<std::size_t>((t * heads + h) * D + i)];
          double& x2 = x[static_cast<std::size_t>((t * heads + h) * D + i + half)];
          double n1 = x1 * std::cos(a) - x2 * std::sin(a), n2 = x2 * std::cos(a) + x1 * std::sin(a);
          x1 = n1;
          x2 = n2;
        }
  }
  Mat forward(const std::vector<int32_t>& ids) const {
    const int64_t T = static_cast<int64_t>(ids.size()), H = s.hidden, D = s.head_dim, nh = s.heads, nkv = s.kv_heads;
    Mat h(static_cast<std::size_t>(T * H));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < H; ++i)
        h[static_cast<std::size_t>(t * H + i)] = W("model.embed_tokens.weight")[static_cast<std::size_t>(ids[static_cast<std::size_t>(t)] * H + i)];
    for (int64_t l = 0; l < s.layers; ++l) {
      std::string p = "model.layers." + std::to_string(l) + ".";
      Mat x = norm(h, T, H, p + "input_layernorm.weight");
      Mat q = linear(x, T, p + "self_attn.q_proj", nh * D, H), k = linear(x, T, p + "self_attn.k_proj", nkv * D, H),
          v = linear(x, T, p + "self_attn.v_proj", nkv * D, H);
      if (s.model_type == "qwen3") {
        q = norm(q, T * nh, D, p + "self_attn.q_norm.weight");
        k = norm(k, T * nkv, D, p + "self_attn.k_norm.weight");
      }
      rope(q, T, nh);
      rope(k, T, nkv);
      Mat att(static_cast<std::size_t>(T * nh * D), 0.0);
      for (int64_t hh = 0; hh < nh; ++hh)
        for (int64_t t = 0; t < T; ++t) {
          int64_t kvh = hh / (nh / nkv);
          std::vector<double> sc(static_cast<std::size_t>(T), -INFINITY);
          double mx = -INFINITY;
          for (int64_t j = 0; j <= t; ++j) {
            if (!s.sliding_window.is_null() && t - j >= s.sliding_window.get<int64_t>()) continue;
            double d = 0;
            for (int64_t i = 0; i < D; ++i) d += q[static_cast<std::size_t>((t * nh + hh) * D + i)] * k[static_cast<std::size_t>((j * nkv + kvh) * D + i)];
            sc[static_cast<std::size_t>(j)] = d / std::sqrt(static_cast<double>(D));
            mx = std::max(mx, sc[static_cast<std::size_t>(j)]);
          }
          double sum = 0;
          for (double v2 : sc) sum += std::exp(v2 - mx);
          for (int64_t j = 0; j < T; ++j) {
            double pj = std::exp(sc[static_cast<std::size_t>(j)] - mx) / sum;
            for (int64_t i = 0; i < D; ++i) att[static_cast<std::size_t>((t * nh + hh) * D + i)] += pj * v[static_cast<std::size_t>((j * nkv + kvh) * D + i)];
          }
        }
      Mat o = linear(att, T, p + "self_attn.o_proj", H, nh * D);
      for (std::size_t i = 0; i < h.size(); ++i) h[i] += o[i];
      x = norm(h, T, H, p + "post_attention_layernorm.weight");
      Mat g = linear(x, T, p + "mlp.gate_proj", s.intermediate, H), u = linear(x, T, p + "mlp.up_proj", s.intermediate, H);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      Mat dn = linear(g, T, p + "mlp.down_proj", H, s.intermediate);
      for (std::size_t i = 0; i < h.size(); ++i) h[i] += dn[i];
    }
    Mat x = norm(h, T, H, "model.norm.weight");
    return linear(x, T, s.tied ? "model.embed_tokens" : "lm_head", s.vocab, H);
  }
};

double max_rel_diff(const Tensor& got, const Mat& want) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(got.data<float>()[i] - want[i]));
    ref = std::max(ref, std::abs(want[i]));
  }
  return diff / ref;
}

struct Case {
  const char* name;
  TinySpec spec;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

TinySpec make(std::string type, bool tied, bool bias, int64_t kv, Json rope = nullptr, Json window = nullptr) {
  TinySpec s;
  s.model_type = std::move(type);
  s.tied = tied;
  s.bias = bias;
  s.kv_heads = kv;
  s.rope_scaling = std::move(rope);
  s.sliding_window = std::move(window);
  return s;
}

class ModelTest : public ::testing::TestWithParam<Case> {};

TEST_P(ModelTest, LogitsMatchNaiveForwardAndCacheIsConsistent) {
  const TinySpec& s = GetParam().spec;
  TinyWeights w = testing::tiny_weights(s, 1234);
  auto dir = testing::write_tiny_model(GetParam().name, s, w);
  Naive naive{s, w, {}};
  // The naive model takes its frequencies from the rope formulas tested in
  // tests/kernels/rotary_test.cc.
  ModelConfig config = load_model_config(dir);
  kernels::RopeSpec rs;
  rs.theta = config.rope_theta;
  rs.head_dim = s.head_dim;
  if (config.rope_scaling.kind == RopeScaling::kLlama3) {
    rs.kind = kernels::RopeSpec::kLlama3;
    rs.factor = config.rope_scaling.factor;
    rs.low_freq_factor = config.rope_scaling.low_freq_factor;
    rs.high_freq_factor = config.rope_scaling.high_freq_factor;
    rs.original_max_position_embeddings = config.rope_scaling.original_max_position_embeddings;
  }
  for (float f : kernels::rope_frequencies(rs).inv_freq) naive.inv_freq.push_back(f);

  std::vector<int32_t> ids;
  std::mt19937 rng(7);
  for (int i = 0; i < 19; ++i) ids.push_back(static_cast<int32_t>(rng() % s.vocab));
  Mat want = naive.forward(ids);

  for (auto attn : {AttnImplementation::kSdpa, AttnImplementation::kEager}) {
    CausalLM model = CausalLM::from_pretrained(dir, testing::load_options(DType::kF32, Device::cpu(), attn));
    KVCache cache = model.new_cache(64);
    Tensor full = model.forward(ids, cache, true);
    EXPECT_LE(max_rel_diff(full, want), 1e-5) << "attn " << static_cast<int>(attn);
    // Prefill 11 tokens, then one at a time: the last-token logits agree.
    KVCache cache2 = model.new_cache(64);
    model.forward(std::span<const int32_t>(ids.data(), 11), cache2, false);
    Tensor last;
    for (std::size_t t = 11; t < ids.size(); ++t) last = model.forward(std::span<const int32_t>(&ids[t], 1), cache2, false);
    Mat want_last(want.end() - s.vocab, want.end());
    EXPECT_LE(max_rel_diff(last, want_last), 1e-5);
  }

  // bfloat16: every logit is a bf16 value and close to the fp32 result.
  CausalLM bf16 = CausalLM::from_pretrained(dir, testing::load_options(DType::kBF16, Device::cpu(), AttnImplementation::kSdpa));
  KVCache cache = bf16.new_cache(64);
  Tensor logits = bf16.forward(ids, cache, true);
  for (int64_t i = 0; i < logits.numel(); ++i)
    ASSERT_EQ(logits.data<float>()[i], round_to_dtype(logits.data<float>()[i], DType::kBF16));
  // bf16 vs exact fp32 (not vs torch's bf16, which compare.py checks at 3e-2):
  // a loose sanity bound on a whole model of rounded activations.
  EXPECT_LE(max_rel_diff(logits, want), 1e-1);
  EXPECT_GT(max_rel_diff(logits, want), 0.0);  // the rounding really happened
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Families, ModelTest,
    ::testing::Values(Case{"qwen3_tied_gqa", make("qwen3", true, false, 2)},
                      Case{"qwen2_bias_untied_mha", make("qwen2", false, true, 4)},
                      Case{"llama3_rope_mqa", make("llama", false, false, 1,
                                                   Json{{"rope_type", "llama3"}, {"factor", 8.0},
                                                        {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                                        {"original_max_position_embeddings", 16}})},
                      Case{"mistral_window", make("mistral", true, false, 2, nullptr, 5)}),
    [](const auto& info) { return std::string(info.param.name); });

void expect_error(const std::function<void()>& f, ErrorKind kind, std::vector<std::string> fragments) {
  try {
    f();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& frag : fragments) EXPECT_NE(std::string(e.what()).find(frag), std::string::npos) << e.what();
  }
}

TEST(ModelLoad, MissingTensorIsNamed) {
  TinySpec s;
  TinyWeights w = testing::tiny_weights(s, 1);
  w.erase("model.layers.1.mlp.up_proj.weight");
  auto dir = testing::write_tiny_model("missing", s, w);
  expect_error([&] { CausalLM::from_pretrained(dir); }, ErrorKind::kNotFound,
               {"model.layers.1.mlp.up_proj.weight", "[48, 32]"});
  std::filesystem::remove_all(dir);
}

TEST(ModelLoad, UntiedWithoutLmHeadIsMissing) {
  TinySpec s;
  TinyWeights w = testing::tiny_weights(s, 1);  // tied: no lm_head written
  s.tied = false;
  auto dir = testing::write_tiny_model("nohead", s, w);
  expect_error([&] { CausalLM::from_pretrained(dir); }, ErrorKind::kNotFound, {"lm_head.weight"});
  std::filesystem::remove_all(dir);
}

TEST(ModelLoad, WrongShapeNamesExpectedAndActual) {
  TinySpec s;
  TinyWeights w = testing::tiny_weights(s, 1);
  w["model.layers.0.self_attn.k_proj.weight"] = {{16, 32}, std::vector<float>(16 * 32, 0.5f)};
  auto dir = testing::write_tiny_model("shape", s, w);
  expect_error([&] { CausalLM::from_pretrained(dir); }, ErrorKind::kInvalidInput,
               {"model.layers.0.self_attn.k_proj.weight", "[16, 32]", "[32, 32]"});
  std::filesystem::remove_all(dir);
}

TEST(ModelLoad, UnsupportedDtypeAndBadInputs) {
  TinySpec s;
  auto dir = testing::write_tiny_model("dtype", s, testing::tiny_weights(s, 1));
  expect_error([&] { CausalLM::from_pretrained(dir, testing::load_options(DType::kF64, Device::cpu(), AttnImplementation::kSdpa)); },
               ErrorKind::kUnsupported, {"float64"});
  // A CPU build cannot run on a GPU at all; a GPU build on a machine without
  // one is told that none is visible. Both are a user's error (exit code 2).
  if (!built_with_gpu())
    expect_error([&] { CausalLM::from_pretrained(dir, testing::load_options(DType::kF32, Device::gpu(0), AttnImplementation::kSdpa)); },
                 ErrorKind::kUnsupported, {"cuda:0"});
  else if (gpu_count() == 0)
    expect_error([&] { CausalLM::from_pretrained(dir, testing::load_options(DType::kF32, Device::gpu(0), AttnImplementation::kSdpa)); },
                 ErrorKind::kInvalidInput, {"cuda:0", "visible"});
  CausalLM model = CausalLM::from_pretrained(dir);
  KVCache cache = model.new_cache(200);
  std::vector<int32_t> bad = {1, 64};
  expect_error([&] { model.forward(bad, cache, true); }, ErrorKind::kInvalidInput, {"64", "vocabulary"});
  std::vector<int32_t> too_long(129, 3);
  expect_error([&] { model.forward(too_long, cache, true); }, ErrorKind::kInvalidInput, {"max_position_embeddings"});
  EXPECT_THROW(parse_attn_implementation("flash"), Error);
  std::filesystem::remove_all(dir);
}

TEST(ModelLoad, Bf16CheckpointLoads) {
  TinySpec s;
  TinyWeights w = testing::tiny_weights(s, 3);
  auto dir = testing::write_tiny_model("bf16", s, w);
  // Rewrite the same weights as BF16.
  std::vector<std::vector<uint16_t>> store;
  std::vector<TensorToWrite> tensors;
  for (const auto& [n, sv] : w) {
    std::vector<uint16_t> b;
    for (float f : sv.second) b.push_back(float_to_bf16(f));
    store.push_back(std::move(b));
    tensors.push_back({n, DType::kBF16, sv.first, store.back().data(), store.back().size() * 2});
  }
  save_checkpoint(dir, tensors);
  CausalLM model = CausalLM::from_pretrained(dir, testing::load_options(DType::kF32, Device::cpu(), AttnImplementation::kSdpa));
  KVCache cache = model.new_cache(8);
  std::vector<int32_t> ids = {5, 9, 2};
  Tensor logits = model.forward(ids, cache, true);
  EXPECT_EQ(logits.shape(), Shape({3, 64}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hipformers
