// Small host arrays (token ids, positions, rope frequencies) a kernel needs on
// the device: copied into a buffer from the device's caching allocator, which
// lives until the returned tensor is dropped (stream order keeps it valid for
// the kernels queued before that).
#pragma once

#include <span>

#include "hipformers/core/tensor.h"
#include "hipformers/runtime/allocator.h"

namespace hipformers::kernels::gpu {

template <typename T> Tensor upload(std::span<const T> values, DType dtype, const Device& device) {
  Tensor t = empty_tensor(Shape{static_cast<int64_t>(values.size())}, dtype, device);
  copy_bytes(t.mutable_raw_data(), device, values.data(), Device::cpu(), values.size_bytes());
  return t;
}

}  // namespace hipformers::kernels::gpu
