// 16-byte vectors of a storage type (8 bf16/f16 or 4 f32 values in one
// uint4), for kernels that stream memory with vector loads. Elements convert
// with the same rounding as load()/store() in gpu_types.h.
#pragma once

#include <cstdint>

#include "gpu_types.h"

namespace hipformers::kernels::gpu {

template <typename T> constexpr int kVec16 = static_cast<int>(16 / sizeof(T));

__device__ __forceinline__ uint32_t vec16_word(const uint4& u, int i) {
  return i == 0 ? u.x : i == 1 ? u.y : i == 2 ? u.z : u.w;
}
__device__ __forceinline__ void vec16_set_word(uint4& u, int i, uint32_t v) {
  if (i == 0) u.x = v;
  else if (i == 1) u.y = v;
  else if (i == 2) u.z = v;
  else u.w = v;
}

// Element e (a compile-time constant after unrolling) as float.
template <typename T> __device__ __forceinline__ float vec16_get(const uint4& u, int e);
template <> __device__ __forceinline__ float vec16_get<float>(const uint4& u, int e) {
  return __uint_as_float(vec16_word(u, e));
}
template <> __device__ __forceinline__ float vec16_get<gpu_bf16>(const uint4& u, int e) {
  const uint32_t w = vec16_word(u, e / 2);
  return __uint_as_float(e % 2 ? (w & 0xffff0000u) : (w << 16));
}
template <> __device__ __forceinline__ float vec16_get<gpu_half>(const uint4& u, int e) {
  const uint32_t w = vec16_word(u, e / 2);
  return __half2float(__ushort_as_half(static_cast<unsigned short>(e % 2 ? (w >> 16) : (w & 0xffffu))));
}

// The storage bits of v (rounded to nearest even, as store() does).
template <typename T> __device__ __forceinline__ uint32_t storage_bits(float v);
template <> __device__ __forceinline__ uint32_t storage_bits<float>(float v) { return __float_as_uint(v); }
template <> __device__ __forceinline__ uint32_t storage_bits<gpu_bf16>(float v) { return float_to_bf16_bits(v); }
template <> __device__ __forceinline__ uint32_t storage_bits<gpu_half>(float v) {
  return __half_as_ushort(__float2half_rn(v));
}

// Sets element e of u to v in storage format.
template <typename T> __device__ __forceinline__ void vec16_put(uint4& u, int e, float v) {
  if constexpr (sizeof(T) == 4) {
    vec16_set_word(u, e, storage_bits<T>(v));
  } else {
    const uint32_t w = vec16_word(u, e / 2), b = storage_bits<T>(v);
    vec16_set_word(u, e / 2, e % 2 ? ((w & 0xffffu) | (b << 16)) : ((w & 0xffff0000u) | b));
  }
}

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace hipformers::kernels::gpu
