#include <gtest/gtest.h>

#include "hipformers/core/error.h"
#include "hipformers/generation/generate.h"
#include "tiny_model.h"

namespace hipformers {
namespace {

struct Fixture : ::testing::Test {
  void SetUp() override {
    testing::TinySpec s;
    dir = testing::write_tiny_model("generate", s, testing::tiny_weights(s, 99));
    model = std::make_unique<CausalLM>(CausalLM::from_pretrained(dir));
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::vector<int32_t> greedy_by_hand(std::vector<int32_t> ids, int n) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      KVCache cache = model->new_cache(64);
      Tensor logits = model->forward(ids, cache, false);
      const float* row = logits.data<float>();
      int32_t next = static_cast<int32_t>(std::max_element(row, row + 64) - row);
      out.push_back(next);
      ids.push_back(next);
    }
    return out;
  }
  std::filesystem::path dir;
  std::unique_ptr<CausalLM> model;
  GenerationConfig defaults;  // greedy, no EOS
};

TEST_F(Fixture, GreedyMatchesRecomputingWithoutCacheForSeveralPrompts) {
  std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4, 5}, {7}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11}};
  GenerationOptions o;
  o.max_new_tokens = 6;
  std::vector<std::pair<std::size_t, int32_t>> streamed;
  o.on_token = [&](std::size_t s, int32_t t) { streamed.emplace_back(s, t); return true; };
  auto out = generate(*model, defaults, prompts, o);
  ASSERT_EQ(out.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].generated, greedy_by_hand(prompts[i], 6)) << "prompt " << i;
    EXPECT_EQ(out[i].stop_reason, StopReason::kMaxNewTokens);
  }
  EXPECT_EQ(streamed.size(), 18u);
  EXPECT_EQ(streamed[6].first, 1u);
}

TEST_F(Fixture, EosStopsAndMinNewTokensMasksIt) {
  std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
  auto free_run = greedy_by_hand(prompt, 4);
  GenerationOptions o;
  o.max_new_tokens = 4;
  o.eos_token_ids = std::vector<int64_t>{free_run[1]};
  auto stopped = generate(*model, defaults, {prompt}, o).front();
  EXPECT_EQ(stopped.stop_reason, StopReason::kEos);
  EXPECT_EQ(stopped.generated.back(), free_run[1]);
  EXPECT_LE(stopped.generated.size(), 2u);
  o.min_new_tokens = 4;  // EOS can never be chosen before 4 tokens
  auto forced = generate(*model, defaults, {prompt}, o).front();
  EXPECT_EQ(forced.generated.size(), 4u);
  for (int32_t t : forced.generated) EXPECT_NE(t, free_run[1]);
}

TEST_F(Fixture, SamplingIsSeededAndCallbackCanStop) {
  GenerationOptions o;
  o.max_new_tokens = 8;
  o.do_sample = true;
  o.temperature = 1.5;
  o.top_k = 20;
  o.top_p = 0.9;
  o.seed = 5;
  auto a = generate(*model, defaults, {{1, 2}}, o).front().generated;
  auto b = generate(*model, defaults, {{1, 2}}, o).front().generated;
  EXPECT_EQ(a, b);
  o.on_token = [](std::size_t, int32_t) { return false; };
  auto c = generate(*model, defaults, {{1, 2}}, o).front();
  EXPECT_EQ(c.generated.size(), 1u);
  EXPECT_EQ(c.stop_reason, StopReason::kCallback);
}

TEST_F(Fixture, BadRequestsAreErrors) {
  GenerationOptions o;
  o.max_new_tokens = 2;
  EXPECT_THROW(generate(*model, defaults, {{}}, o), Error);
  EXPECT_THROW(generate(*model, defaults, {std::vector<int32_t>(129, 1)}, o), Error);
  EXPECT_THROW(generate(*model, defaults, {{64}}, o), Error);
  o.stop_strings = {"x"};
  EXPECT_THROW(generate(*model, defaults, {{1}}, o), Error);  // no tokenizer
  o.stop_strings.clear();
  o.temperature = -1;
  o.do_sample = true;
  EXPECT_THROW(generate(*model, defaults, {{1}}, o), Error);
}

}  // namespace
}  // namespace hipformers
