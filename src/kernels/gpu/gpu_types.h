// Device-side building blocks shared by every src/kernels/*_gpu.cu:
// the 16-bit float types of each platform, fp32 load/store with the host's
// round-to-nearest-even, the host rounding emulation (round_to_dtype) on the
// device, and warp/block reductions written for 32- and 64-wide wavefronts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "hipformers/core/dtype.h"
#include "hipformers/core/error.h"
#include "gpu_context.h"

#if defined(HIPFORMERS_WITH_CUDA)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
using gpu_bf16 = __nv_bfloat16;
using gpu_half = __half;
#define HF_WARP_SIZE 32
#else
#include <hip/hip_fp16.h>
#if __has_include(<hip/hip_bf16.h>)
#include <hip/hip_bf16.h>
using gpu_bf16 = __hip_bfloat16;
#else
#include <hip/hip_bfloat16.h>  // ROCm 5.x (Debian): struct hip_bfloat16
using gpu_bf16 = hip_bfloat16;
#endif
using gpu_half = __half;
// CDNA (gfx9xx) runs 64-wide wavefronts, RDNA (gfx10+) 32-wide; the compiler
// says which for the target being compiled. The host pass never uses it.
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define HF_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define HF_WARP_SIZE 64
#endif
#endif

namespace hipformers::kernels::gpu {

using hipformers::gpu::check;
using hipformers::gpu::check_launch;
using hipformers::gpu::stream_for;

constexpr int kWarp = HF_WARP_SIZE;
// Reductions keep one slot per warp; 1024 threads / 32 lanes.
constexpr int kMaxWarps = 32;

// Which rounding the host reference emulates (DType values are host-only
// enums; kernels get this small code instead).
enum RoundMode : int { kRoundNone = 0, kRoundBF16 = 1, kRoundF16 = 2 };
inline RoundMode round_mode(DType d) {
  return d == DType::kBF16 ? kRoundBF16 : d == DType::kF16 ? kRoundF16 : kRoundNone;
}

__device__ __forceinline__ uint32_t float_bits(float v) { return __float_as_uint(v); }

// Round-to-nearest-even to bf16, NaN kept quiet: the host's float_to_bf16.
__device__ __forceinline__ uint16_t float_to_bf16_bits(float v) {
  uint32_t u = float_bits(v);
  if (v != v) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
__device__ __forceinline__ float bf16_bits_to_float(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

__device__ __forceinline__ float round_to(float v, int mode) {
  if (mode == kRoundBF16) return bf16_bits_to_float(float_to_bf16_bits(v));
  if (mode == kRoundF16) return __half2float(__float2half_rn(v));
  return v;
}

// Loads and stores through the storage type, always converting with the same
// rounding as the host code (bf16 by bits, so both platforms agree exactly).
template <typename T> struct Storage;
template <> struct Storage<float> {
  static constexpr int kMode = kRoundNone;
  __device__ __forceinline__ static float load(const float* p) { return *p; }
  __device__ __forceinline__ static void store(float* p, float v) { *p = v; }
};
template <> struct Storage<gpu_bf16> {
  static constexpr int kMode = kRoundBF16;
  __device__ __forceinline__ static float load(const gpu_bf16* p) {
    return bf16_bits_to_float(*reinterpret_cast<const uint16_t*>(p));
  }
  __device__ __forceinline__ static void store(gpu_bf16* p, float v) {
    *reinterpret_cast<uint16_t*>(p) = float_to_bf16_bits(v);
  }
};
template <> struct Storage<gpu_half> {
  static constexpr int kMode = kRoundF16;
  __device__ __forceinline__ static float load(const gpu_half* p) { return __half2float(*p); }
  __device__ __forceinline__ static void store(gpu_half* p, float v) { *p = __float2half_rn(v); }
};
template <typename T> __device__ __forceinline__ float load(const T* p) { return Storage<T>::load(p); }
template <typename T> __device__ __forceinline__ void store(T* p, float v) { Storage<T>::store(p, v); }
// v as a T would hold it after store().
template <typename T> __device__ __forceinline__ float stored_as(float v) {
  T t;
  store(&t, v);
  return load(&t);
}

__device__ __forceinline__ float shfl_xor(float v, int mask) {
#if defined(HIPFORMERS_WITH_CUDA)
  return __shfl_xor_sync(0xffffffffu, v, mask, kWarp);
#else
  return __shfl_xor(v, mask, kWarp);
#endif
}

// Orders the warp's shared-memory accesses before the call against those
// after it (a wavefront's LDS accesses are processed in order on AMD, so
// there it only has to stop the compiler from moving them).
__device__ __forceinline__ void warp_sync() {
#if defined(HIPFORMERS_WITH_CUDA)
  __syncwarp();
#else
  __builtin_amdgcn_wave_barrier();
#endif
}

template <int Width = kWarp> __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = Width / 2; o > 0; o >>= 1) v += shfl_xor(v, o);
  return v;
}
template <int Width = kWarp> __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = Width / 2; o > 0; o >>= 1) v = fmaxf(v, shfl_xor(v, o));
  return v;
}

// Sum over the whole block (blockDim.x a multiple of the warp size); every
// thread gets the result. `scratch` holds kMaxWarps floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

// Dispatches a callable templated on the storage type of `dtype`.
template <typename F> void dispatch_float(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: f(float{}); return;
    case DType::kBF16: f(gpu_bf16{}); return;
    case DType::kF16: f(gpu_half{}); return;
    default: throw_error(ErrorKind::kUnsupported, std::string("GPU kernels take F32, BF16 or F16, not ") + dtype_name(dtype));
  }
}

inline int blocks_for(int64_t n, int threads) {
  return static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535 * 16));
}

}  // namespace hipformers::kernels::gpu
