// argmax as a max over 64-bit keys, (order-preserving bits of the value)
// << 32 | (0xffffffff - index): NaN above +inf, -0 folded to +0, so the
// largest key is exactly argmax()'s answer (first index on ties, first NaN
// wins) and partial answers combine by max (atomicMax across blocks).
// Shared by argmax_rows (logits_gpu.cu) and the persistent decode step.
#pragma once

#include <cstdint>

#include "gpu_types.h"

namespace hipformers::kernels::gpu {

__device__ __forceinline__ unsigned long long argmax_key(float v, int64_t i) {
  uint32_t b = __float_as_uint(v);
  uint32_t ordered;
  if (v != v) {
    ordered = 0xffffffffu;  // NaN: above everything
  } else {
    if ((b << 1) == 0) b = 0;  // -0 == +0
    ordered = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  }
  return (static_cast<unsigned long long>(ordered) << 32) | (0xffffffffu - static_cast<uint32_t>(i));
}

__device__ __forceinline__ unsigned long long max_u64(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}

__device__ __forceinline__ unsigned long long shfl_xor_u64(unsigned long long v, int mask) {
  const int lo = static_cast<int>(static_cast<uint32_t>(v)), hi = static_cast<int>(static_cast<uint32_t>(v >> 32));
  const int lo2 = shfl_xor(lo, mask), hi2 = shfl_xor(hi, mask);
  return (static_cast<unsigned long long>(static_cast<uint32_t>(hi2)) << 32) | static_cast<uint32_t>(lo2);
}

// The index a key stands for.
__device__ __forceinline__ int32_t argmax_key_index(unsigned long long key) {
  return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(key));
}

}  // namespace hipformers::kernels::gpu
