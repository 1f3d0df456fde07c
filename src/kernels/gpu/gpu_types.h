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
#include "hipformers/core/fp8.h"
#include "gpu_context.h"

#if defined(HIPFORMERS_WITH_CUDA)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
using gpu_bf16 = __nv_bfloat16;
using gpu_half = __half;
#if defined(HIPFORMERS_EMULATE_WAVE64)
// A test build (CMake HIPFORMERS_EMULATE_WAVE64=ON): every kernel runs its
// wavefront logic at CDNA's width on an NVIDIA GPU, a wavefront being two
// warps (shfl_xor and warp_sync below), and the CUDA-only fast paths are off
// (HF_CUDA_FAST_PATHS), so it runs what a gfx9 build of ROCm runs.
#define HF_WARP_SIZE 64
#else
#define HF_WARP_SIZE 32
#define HF_CUDA_FAST_PATHS 1
#endif
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

// FP8 e4m3 as the target's own FP8 instructions read it (core/fp8.h): the
// fnuz encoding on gfx940/941/942 (MI300), the OCP e4m3fn one on gfx950 and
// NVIDIA. Decided per compiled target, like the wavefront width; a
// checkpoint's F8_E4M3 (e4m3fn) weights need fp8_e4m3fn_to_fnuz_bits and a
// doubled scale before an fnuz instruction may read them. The host asks
// native_fp8_e4m3_format(arch) of a device's architecture string.
#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
constexpr Fp8Format kNativeFp8E4M3 = Fp8Format::kE4M3FNUZ;
#else
constexpr Fp8Format kNativeFp8E4M3 = Fp8Format::kE4M3FN;
#endif
__device__ __forceinline__ float fp8_native_e4m3_to_float(uint8_t b) { return fp8_e4m3_to_float(b, kNativeFp8E4M3); }

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

#if defined(HIPFORMERS_EMULATE_WAVE64)
// The emulated 64-wide wavefront: warps 2w and 2w + 1 of the block. A lane
// mask below 32 stays inside one warp (a shuffle); 32 and above goes through
// shared memory between two named barriers of the pair (ids 1..15, so blocks
// of at most 960 threads; the kernels cap theirs in this build). Like a real
// wavefront's shuffle, it must be reached by all 64 lanes together; a lane
// whose partner warp does not exist (a partial wavefront) gets a NaN, so a
// result that depended on it shows in the tests instead of hanging.
__device__ __forceinline__ void wave64_pair_barrier() {
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  asm volatile("barrier.sync %0, 64;" ::"r"(1 + t / 64) : "memory");
}
__device__ __forceinline__ int wave64_shfl_xor(int v, int mask) {
  __shared__ int slots[960];
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned n = blockDim.x * blockDim.y * blockDim.z;
  if (mask < 32) return __shfl_xor_sync(0xffffffffu, v, mask, 32);
  if (n > 960) __trap();
  if ((t | 63u) >= n) return 0x7fc00000;  // no partner warp: a quiet NaN's bits
  slots[t] = v;
  wave64_pair_barrier();
  const int r = slots[(t & ~63u) | ((t & 63u) ^ static_cast<unsigned>(mask))];
  wave64_pair_barrier();  // slots may be rewritten by the next exchange
  return r;
}
#endif

// v of lane (lane ^ mask) of the wavefront; float and int bits.
__device__ __forceinline__ int shfl_xor(int v, int mask) {
#if defined(HIPFORMERS_EMULATE_WAVE64)
  return wave64_shfl_xor(v, mask);
#elif defined(HIPFORMERS_WITH_CUDA)
  return __shfl_xor_sync(0xffffffffu, v, mask, kWarp);
#else
  return __shfl_xor(v, mask, kWarp);
#endif
}
__device__ __forceinline__ float shfl_xor(float v, int mask) {
  return __int_as_float(shfl_xor(__float_as_int(v), mask));  // the same 32 bits move
}

// Orders the warp's shared-memory accesses before the call against those
// after it (a wavefront's LDS accesses are processed in order on AMD, so
// there it only has to stop the compiler from moving them).
__device__ __forceinline__ void warp_sync() {
#if defined(HIPFORMERS_EMULATE_WAVE64)
  wave64_pair_barrier();
#elif defined(HIPFORMERS_WITH_CUDA)
  __syncwarp();
#else
  __builtin_amdgcn_wave_barrier();
#endif
}

// The wavefront width the kernels were compiled for, as the host sizes
// launches by it: the device's own (warpSize), except in the wave64
// emulation build, whose kernels treat two NVIDIA warps as one.
inline int kernel_warp_size(int device_warp_size) {
#if defined(HIPFORMERS_EMULATE_WAVE64)
  (void)device_warp_size;
  return 64;
#else
  return device_warp_size;
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
