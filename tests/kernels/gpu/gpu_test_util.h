// Helpers for the GPU kernel tests: move random host inputs to the GPU in a
// storage dtype, poison outputs, and compare against the CPU reference run on
// the same (dtype-rounded) values.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "../test_random.h"
#include "hipformers/core/tensor.h"
#include "hipformers/runtime/allocator.h"
#include "hipformers/runtime/device.h"

namespace hipformers::testing {

inline Device test_gpu() { return Device::gpu(0); }

// The host F32 values rounded to `dtype` (what the GPU tensor will hold).
inline Tensor rounded(const Tensor& host, DType dtype) { return host.to(dtype).to(DType::kF32); }

// `host` (F32) stored as `dtype` on the GPU.
inline Tensor to_gpu(const Tensor& host, DType dtype) { return host.to(dtype).to(test_gpu()); }

// A GPU tensor filled with NaN, so an output the kernel never writes fails.
inline Tensor poisoned(const Shape& shape, DType dtype) {
  Tensor host = Tensor::empty(shape, DType::kF32);
  float* p = host.mutable_data<float>();
  for (int64_t i = 0; i < host.numel(); ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
  return to_gpu(host, dtype);
}

inline Tensor to_host_f32(const Tensor& gpu) {
  Tensor h = gpu.to(Device::cpu());
  return h.dtype() == DType::kF32 ? h : h.to(DType::kF32);
}

// Every element within atol + rtol * |expected|; NaN never matches.
inline void expect_close(const Tensor& actual_gpu, const Tensor& expected, float atol, float rtol,
                         const std::string& what) {
  Tensor actual = to_host_f32(actual_gpu);
  ASSERT_EQ(actual.numel(), expected.numel()) << what;
  const float* a = actual.data<float>();
  const float* e = expected.data<float>();
  int64_t bad = 0;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const bool ok = std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i]);
    if (!ok && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << e[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << actual.numel() << " elements differ";
}

struct Tolerance {
  float atol, rtol;
};
// fp32: summation order only. bf16/f16: a couple of units in the last place
// (the GPU sums in a different order, so a rounding boundary can fall either way).
inline Tolerance tolerance(DType dtype, float scale = 1.0f) {
  if (dtype == DType::kBF16) return {2e-2f * scale, 1.6e-2f};
  if (dtype == DType::kF16) return {2e-3f * scale, 2e-3f};
  return {1e-5f * scale, 1e-4f};
}

inline const char* name(DType d) { return dtype_name(d); }

}  // namespace hipformers::testing
