#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "hipformers/core/error.h"
#include "hipformers/generation/sampling.h"

namespace hipformers {
namespace {

const float kInf = std::numeric_limits<float>::infinity();

std::vector<float> log_probs(std::vector<float> p) {
  for (float& v : p) v = std::log(v);
  return p;
}

TEST(Processors, RepetitionPenaltyDividesPositiveMultipliesNegativeOncePerToken) {
  std::vector<float> x = {2, -1, 0.5f, 3};
  std::vector<int32_t> ctx = {0, 1, 1};
  apply_repetition_penalty(x, ctx, 2.0);
  EXPECT_EQ(x, (std::vector<float>{1, -2, 0.5f, 3}));
}

TEST(Processors, TemperatureDivides) {
  std::vector<float> x = {2, 4};
  apply_temperature(x, 2.0);
  EXPECT_EQ(x, (std::vector<float>{1, 2}));
}

TEST(Processors, TopKKeepsTiesAtTheBoundary) {
  std::vector<float> x = {1, 3, 2, 3};
  apply_top_k(x, 2);
  EXPECT_EQ(x, (std::vector<float>{-kInf, 3, -kInf, 3}));
  std::vector<float> y = {1, 3, 2, 3};
  apply_top_k(y, 3);
  EXPECT_EQ(y, (std::vector<float>{-kInf, 3, 2, 3}));
  std::vector<float> z = {1, 3};
  apply_top_k(z, 0);  // off
  EXPECT_EQ(z, (std::vector<float>{1, 3}));
}

TEST(Processors, TopPKeepsTheSmallestSetReachingP) {
  std::vector<float> x = log_probs({0.5f, 0.3f, 0.15f, 0.05f});
  apply_top_p(x, 0.75);  // ascending cumsum 0.05, 0.2 <= 0.25 removed; 0.5 kept
  EXPECT_TRUE(std::isfinite(x[0]) && std::isfinite(x[1]));
  EXPECT_EQ(x[2], -kInf);
  EXPECT_EQ(x[3], -kInf);
  std::vector<float> y = log_probs({0.5f, 0.3f, 0.15f, 0.05f});
  apply_top_p(y, 0.01);  // the most likely token always survives
  EXPECT_TRUE(std::isfinite(y[0]));
  EXPECT_EQ(y[1], -kInf);
}

TEST(Processors, MinPScalesByTheTopProbability) {
  std::vector<float> x = log_probs({0.5f, 0.3f, 0.15f, 0.05f});
  apply_min_p(x, 0.5);  // threshold 0.25
  EXPECT_TRUE(std::isfinite(x[0]) && std::isfinite(x[1]));
  EXPECT_EQ(x[2], -kInf);
  EXPECT_EQ(x[3], -kInf);
}

TEST(Processors, InvalidValuesAreErrors) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_THROW(validate(p), Error);
  p = {};
  p.top_p = 1.5;
  EXPECT_THROW(validate(p), Error);
  p = {};
  p.top_k = -1;
  EXPECT_THROW(validate(p), Error);
  p = {};
  p.repetition_penalty = 0;
  EXPECT_THROW(validate(p), Error);
  p = {};
  p.min_p = -0.1;
  EXPECT_THROW(validate(p), Error);
}

TEST(Selection, GreedyAppliesRepetitionPenaltyOnly) {
  std::vector<float> x = {3, 2.5f, -1};
  std::vector<int32_t> ctx = {0};
  SamplingParams p;
  p.repetition_penalty = 1.5;  // 3 -> 2, so 2.5 wins
  p.temperature = 0.01;        // ignored when greedy
  std::mt19937_64 rng(1);
  EXPECT_EQ(select_next_token(x, ctx, p, rng), 1);
}

TEST(Selection, SeededSamplingIsReproducibleAndFollowsTheDistribution) {
  SamplingParams p;
  p.do_sample = true;
  const std::vector<float> base = log_probs({0.6f, 0.25f, 0.1f, 0.05f});
  auto draw = [&](uint64_t seed, int n) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      std::vector<float> x = base;
      out.push_back(select_next_token(x, {}, p, rng));
    }
    return out;
  };
  EXPECT_EQ(draw(42, 50), draw(42, 50));
  EXPECT_NE(draw(42, 50), draw(43, 50));
  auto many = draw(7, 20000);
  std::vector<int> counts(4);
  for (int32_t t : many) counts[static_cast<std::size_t>(t)]++;
  const double want[] = {0.6, 0.25, 0.1, 0.05};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(counts[static_cast<std::size_t>(i)] / 20000.0, want[i], 0.015) << i;
  // top_k = 1 makes sampling greedy.
  p.top_k = 1;
  for (int32_t t : draw(9, 100)) EXPECT_EQ(t, 0);
}

}  // namespace
}  // namespace hipformers
