// Our CPU logits and greedy tokens against references Transformers produced
// for the tiny committed models in tests/data/models/<name>/
// (tests/parity/make_ci_references.sh writes them):
//   config.json, model.safetensors       the random-weight model
//   reference.safetensors                input_ids_<i> (I64), logits_<i> (F32 [rows, vocab]),
//                                        rows_<i> (I64: the positions the logits rows belong to)
//   reference.json                       {"dtype", "num_prompts", "greedy_prompt", "greedy_tokens"}
//   bfloat16/, float16/                  the same two reference files, made by Transformers
//                                        on the CPU with the model cast to that dtype
// Bars (issue 3): float32 max|diff| / max|ref| <= 1e-4 and the greedy
// continuation identical; bfloat16 <= 3e-2. float16 has no bar in the issue;
// its rounding is 8x finer than bfloat16's, so it is held to 1e-2.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <tuple>

#include "hipformers/core/json.h"
#include "hipformers/io/safetensors.h"
#include "hipformers/models/causal_lm.h"
#include "model_options.h"
#include "test_paths.h"

namespace hipformers {
namespace {

std::vector<int64_t> read_i64(const SafetensorsFile& f, const std::string& name) {
  const TensorView& v = f.tensor(name);
  std::vector<int64_t> out(static_cast<std::size_t>(v.numel()));
  std::memcpy(out.data(), v.data, v.nbytes);
  return out;
}

// max|ours - ref| / max|ref| over the stored logits rows of prompt `p`.
double logits_relative_diff(const CausalLM& model, const SafetensorsFile& ref, int64_t p) {
  const int64_t vocab = model.config().vocab_size;
  std::vector<int64_t> ids64 = read_i64(ref, "input_ids_" + std::to_string(p));
  std::vector<int64_t> rows = read_i64(ref, "rows_" + std::to_string(p));
  std::vector<int32_t> ids(ids64.begin(), ids64.end());
  KVCache cache = model.new_cache(static_cast<int64_t>(ids.size()));
  Tensor logits = model.forward(ids, cache, true);
  const TensorView& want = ref.tensor("logits_" + std::to_string(p));
  EXPECT_EQ(want.numel(), static_cast<int64_t>(rows.size()) * vocab);
  if (want.numel() != static_cast<int64_t>(rows.size()) * vocab) return INFINITY;
  std::vector<float> w(static_cast<std::size_t>(want.numel()));
  std::memcpy(w.data(), want.data, want.nbytes);
  double diff = 0, scale = 0;
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (int64_t v = 0; v < vocab; ++v) {
      double a = logits.data<float>()[rows[r] * vocab + v];
      double b = w[r * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(v)];
      diff = std::max(diff, std::abs(a - b));
      scale = std::max(scale, std::abs(b));
    }
  return diff / scale;
}

std::vector<std::filesystem::path> reference_dirs() {
  std::vector<std::filesystem::path> dirs;
  auto root = testing::test_data("models");
  if (std::filesystem::is_directory(root))
    for (const auto& e : std::filesystem::directory_iterator(root))
      if (std::filesystem::exists(e.path() / "reference.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

TEST(HuggingFaceReference, CpuLogitsAndGreedyTokensMatch) {
  auto dirs = reference_dirs();
  ASSERT_FALSE(dirs.empty()) << "no reference models under " << testing::test_data("models")
                             << ": run tests/parity/make_ci_references.sh on a machine with torch + transformers";
  for (const auto& dir : dirs) {
    SCOPED_TRACE(dir.string());
    Json meta = read_json_file(dir / "reference.json");
    ASSERT_EQ(meta.at("dtype").get<std::string>(), "float32");
    SafetensorsFile ref = SafetensorsFile::open(dir / "reference.safetensors");
    for (auto attn : {AttnImplementation::kSdpa, AttnImplementation::kEager}) {
      CausalLM model = CausalLM::from_pretrained(dir, testing::load_options(DType::kF32, Device::cpu(), attn));
      const int64_t vocab = model.config().vocab_size;
      for (int64_t p = 0; p < meta.at("num_prompts").get<int64_t>(); ++p)
        EXPECT_LE(logits_relative_diff(model, ref, p), 1e-4)
            << "prompt " << p << ", attn " << (attn == AttnImplementation::kEager ? "eager" : "sdpa");
      // Greedy continuation, EOS ignored (the reference used min_new_tokens = all).
      std::vector<int64_t> prompt64 = read_i64(ref, "input_ids_" + std::to_string(meta.at("greedy_prompt").get<int64_t>()));
      std::vector<int32_t> seq(prompt64.begin(), prompt64.end());
      std::vector<int64_t> want = meta.at("greedy_tokens").get<std::vector<int64_t>>();
      KVCache cache = model.new_cache(static_cast<int64_t>(seq.size() + want.size()));
      Tensor logits = model.forward(seq, cache, false);
      std::vector<int64_t> got;
      for (std::size_t i = 0; i < want.size(); ++i) {
        const float* row = logits.data<float>();
        int32_t next = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
        got.push_back(next);
        if (i + 1 < want.size()) logits = model.forward(std::span<const int32_t>(&next, 1), cache, false);
      }
      EXPECT_EQ(got, want);
    }
  }
}

// The same models run in bfloat16 and float16 on the CPU against Transformers'
// CPU logits in that dtype. Both sides round weights and activations to 16
// bits, but not at the same places (Transformers rounds after every op; our
// kernels accumulate in f32 and round once per op output), hence the loose bar.
TEST(HuggingFaceReference, CpuLogitsMatchIn16BitDtypes) {
  int checked = 0;
  for (const auto& dir : reference_dirs()) {
    for (auto [name, dtype, bar] : {std::tuple{"bfloat16", DType::kBF16, 3e-2}, std::tuple{"float16", DType::kF16, 1e-2}}) {
      const auto sub = dir / name;
      if (!std::filesystem::exists(sub / "reference.json")) continue;
      SCOPED_TRACE(sub.string());
      Json meta = read_json_file(sub / "reference.json");
      ASSERT_EQ(meta.at("dtype").get<std::string>(), name);
      SafetensorsFile ref = SafetensorsFile::open(sub / "reference.safetensors");
      CausalLM model = CausalLM::from_pretrained(dir, testing::load_options(dtype, Device::cpu(), AttnImplementation::kSdpa));
      for (int64_t p = 0; p < meta.at("num_prompts").get<int64_t>(); ++p)
        EXPECT_LE(logits_relative_diff(model, ref, p), bar) << "prompt " << p;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << "no bfloat16/ or float16/ references under " << testing::test_data("models")
                        << ": run tests/parity/make_ci_references.sh";
}

}  // namespace
}  // namespace hipformers
