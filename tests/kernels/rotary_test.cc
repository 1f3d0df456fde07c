// RoPE frequencies against the published formulas, and the rotation itself.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "hipformers/kernels/rotary.h"
#include "test_random.h"

namespace hipformers {
namespace {

using kernels::RopeSpec;
using Rope = testing::RandomTest;

std::vector<double> default_inv_freq(double theta, int dim) {
  std::vector<double> f(static_cast<std::size_t>(dim / 2));
  for (int i = 0; i < dim / 2; ++i) f[static_cast<std::size_t>(i)] = 1.0 / std::pow(theta, 2.0 * i / dim);
  return f;
}

void expect_freqs(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6 * want[i]) << "inv_freq " << i;
}

TEST(RopeFrequencies, DefaultAndLinear) {
  RopeSpec s;
  s.theta = 1e6;
  s.head_dim = 128;
  expect_freqs(kernels::rope_frequencies(s).inv_freq, default_inv_freq(1e6, 128));
  s.kind = RopeSpec::kLinear;
  s.factor = 4;
  auto want = default_inv_freq(1e6, 128);
  for (double& f : want) f /= 4;
  expect_freqs(kernels::rope_frequencies(s).inv_freq, want);
  EXPECT_EQ(kernels::rope_frequencies(s).attention_scaling, 1.0f);
}

TEST(RopeFrequencies, DynamicNtkGrowsTheBaseBeyondTheTrainedLength) {
  RopeSpec s;
  s.kind = RopeSpec::kDynamic;
  s.theta = 10000;
  s.head_dim = 64;
  s.factor = 2;
  s.max_position_embeddings = 256;
  expect_freqs(kernels::rope_frequencies(s, 100).inv_freq, default_inv_freq(10000, 64));
  double base = 10000 * std::pow(2.0 * 512 / 256 - 1, 64.0 / 62.0);
  expect_freqs(kernels::rope_frequencies(s, 512).inv_freq, default_inv_freq(base, 64));
}

TEST(RopeFrequencies, Llama3KeepsHighScalesLowAndSmoothsTheBand) {
  RopeSpec s;  // Llama 3.2's values
  s.kind = RopeSpec::kLlama3;
  s.theta = 500000;
  s.head_dim = 64;
  s.factor = 32;
  s.low_freq_factor = 1;
  s.high_freq_factor = 4;
  s.original_max_position_embeddings = 8192;
  auto base = default_inv_freq(500000, 64);
  std::vector<double> want;
  int high = 0, low = 0, mid = 0;
  for (double f : base) {
    double wavelen = 2 * std::numbers::pi / f;
    if (wavelen < 8192 / 4.0) {
      want.push_back(f), ++high;
    } else if (wavelen > 8192 / 1.0) {
      want.push_back(f / 32), ++low;
    } else {
      double smooth = (8192 / wavelen - 1) / (4 - 1);
      want.push_back((1 - smooth) * f / 32 + smooth * f), ++mid;
    }
  }
  ASSERT_GT(high, 0);
  ASSERT_GT(low, 0);
  ASSERT_GT(mid, 0);
  expect_freqs(kernels::rope_frequencies(s).inv_freq, want);
}

TEST(RopeFrequencies, YarnRampsBetweenInterpolationAndExtrapolation) {
  RopeSpec s;
  s.kind = RopeSpec::kYarn;
  s.theta = 10000;
  s.head_dim = 64;
  s.factor = 4;
  s.original_max_position_embeddings = 2048;
  s.yarn_attention_factor = 0.1 * std::log(4.0) + 1;
  const int dim = 64;
  auto corr = [&](double rot) { return dim * std::log(2048 / (rot * 2 * std::numbers::pi)) / (2 * std::log(10000.0)); };
  double lo = std::max(std::floor(corr(32)), 0.0), hi = std::min(std::ceil(corr(1)), dim - 1.0);
  std::vector<double> want;
  for (int i = 0; i < dim / 2; ++i) {
    double pos_freq = std::pow(10000.0, 2.0 * i / dim);
    double ramp = std::clamp((i - lo) / (hi - lo), 0.0, 1.0);
    double extrap = 1 - ramp;
    want.push_back(1 / (4 * pos_freq) * (1 - extrap) + 1 / pos_freq * extrap);
  }
  auto got = kernels::rope_frequencies(s);
  expect_freqs(got.inv_freq, want);
  EXPECT_FLOAT_EQ(got.attention_scaling, static_cast<float>(0.1 * std::log(4.0) + 1));
}

TEST_F(Rope, RotationMatchesRotateHalfFormulaAndBackwardInverts) {
  const int T = 5, heads = 3, D = 16;
  RopeSpec s;
  s.theta = 10000;
  s.head_dim = D;
  auto freqs = kernels::rope_frequencies(s);
  freqs.attention_scaling = 1.25f;  // exercise the yarn-style scale too
  Tensor x = random({T, heads * D}, 2.0f);
  Tensor orig = x.clone();
  std::vector<int64_t> pos = {0, 3, 17, 100, 301};
  kernels::apply_rope(x, heads, pos, freqs, DType::kF32);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < D / 2; ++i) {
        double a = pos[static_cast<std::size_t>(t)] * static_cast<double>(freqs.inv_freq[static_cast<std::size_t>(i)]);
        double c = std::cos(a) * 1.25, sn = std::sin(a) * 1.25;
        const float* o = orig.data<float>() + (t * heads + h) * D;
        const float* y = x.data<float>() + (t * heads + h) * D;
        ASSERT_NEAR(y[i], o[i] * c - o[i + D / 2] * sn, 1e-4);
        ASSERT_NEAR(y[i + D / 2], o[i + D / 2] * c + o[i] * sn, 1e-4);
      }
  freqs.attention_scaling = 1.0f;
  Tensor z = orig.clone();
  kernels::apply_rope(z, heads, pos, freqs, DType::kF32);
  kernels::apply_rope_backward(z, heads, pos, freqs);  // rotation is orthogonal: backward undoes it
  for (int64_t i = 0; i < z.numel(); ++i) ASSERT_NEAR(z.data<float>()[i], orig.data<float>()[i], 1e-5);
}

}  // namespace
}  // namespace hipformers
