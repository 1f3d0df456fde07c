// Fresh random inputs for every test (the seed is printed on failure), never
// zeros: a kernel that ignores its input or skips work cannot pass.
#pragma once

#include <gtest/gtest.h>

#include <random>

#include "hipformers/core/tensor.h"

namespace hipformers::testing {

class RandomTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    trace_ = std::make_unique<::testing::ScopedTrace>(__FILE__, __LINE__, "random seed " + std::to_string(seed_));
  }
  // Uniform in [-scale, scale], values of magnitude below 1e-3 * scale pushed away from 0.
  float next(float scale = 1.0f) {
    std::uniform_real_distribution<float> d(-scale, scale);
    float v = d(rng_);
    if (std::abs(v) < 1e-3f * scale) v = v < 0 ? -1e-3f * scale : 1e-3f * scale;
    return v;
  }
  Tensor random(const Shape& shape, float scale = 1.0f) {
    Tensor t = Tensor::empty(shape, DType::kF32);
    float* p = t.mutable_data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = next(scale);
    return t;
  }
  std::mt19937 rng_;
  unsigned seed_ = 0;
  std::unique_ptr<::testing::ScopedTrace> trace_;
};

}  // namespace hipformers::testing
