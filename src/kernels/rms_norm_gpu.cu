#include <cmath>

#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/launch.h"
#include "gpu/vec16.h"

namespace hipformers::kernels::gpu {
namespace {

// One block per row. With `add`, the residual row is updated first (rounded
// as stored) and the norm reads it back, as the CPU reference does.
template <typename T>
__global__ void rms_norm_kernel(const T* __restrict__ add, T* x, const T* __restrict__ weight, T* out,
                                float* __restrict__ rstd, int64_t H, float eps, int mode) {
  StepTraceScope trace_scope;
  allow_dependents();
  grid_dependency_wait();  // launched dependent (gpu/launch.h)
  __shared__ float scratch[kMaxWarps];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * H;
  float sum = 0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v;
    if (add) {
      v = round_to(load(add + base + i) + load(x + base + i), mode);
      store(x + base + i, v);
      v = load(x + base + i);  // what was stored, e.g. bf16-rounded
    } else {
      v = load(x + base + i);
    }
    sum += v * v;
  }
  sum = block_sum(sum, scratch);
  const float inv = 1.0f / sqrtf(sum / static_cast<float>(H) + eps);
  if (rstd && threadIdx.x == 0) rstd[blockIdx.x] = inv;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const float xv = load(x + base + i);
    store(out + base + i, round_to(load(weight + i) * round_to(xv * inv, mode), mode));
  }
}

// Rows of at least kVecRowMin values in 16-byte vectors of V elements: a
// block of 1024 / V threads per row, thread k holding the vectors k,
// k + 1024 / V, ... in registers, so a row costs one pass over memory (the
// kernel above re-reads it, and a 4096-token prefill ran it in 15 waves of
// 1024-thread blocks). Thread k's element e at stride m is exactly what
// thread V k + e of the 1024-thread kernel above handles at its step m, and
// the sum of squares is rebuilt in that kernel's order (per element over m,
// then its warp butterfly: offsets >= V across threads, smaller ones inside
// a thread, then the warps in order), so both give the same bits.
constexpr int kVecPer = 8;  // vectors per thread: rows of up to 8192 values
constexpr int64_t kVecRowMin = 1024;
template <typename T> constexpr int kVecThreads = 1024 / kVec16<T>;

template <typename T>
__global__ void __launch_bounds__(256) rms_norm_vec_kernel(const T* __restrict__ add, T* x,
                                                           const T* __restrict__ weight, T* out,
                                                           float* __restrict__ rstd, int64_t H, float eps, int mode) {
  StepTraceScope trace_scope;
  __shared__ float scratch[kMaxWarps];
  constexpr int V = kVec16<T>, kThreads = kVecThreads<T>;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * H;
  const int64_t nv = H / V;
  // The weight depends on no kernel: loaded while the previous one drains.
  uint4 wv[kVecPer];
#pragma unroll
  for (int k = 0; k < kVecPer; ++k) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(k) * kThreads;
    if (j < nv) wv[k] = *reinterpret_cast<const uint4*>(weight + j * V);
  }
  allow_dependents();
  grid_dependency_wait();  // launched dependent (gpu/launch.h)
  uint4 xv[kVecPer];
  float e[V];
#pragma unroll
  for (int i = 0; i < V; ++i) e[i] = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecPer; ++k) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(k) * kThreads;
    if (j >= nv) break;
    uint4 u = *reinterpret_cast<const uint4*>(x + base + j * V);
    if (add) {
      const uint4 r = *reinterpret_cast<const uint4*>(add + base + j * V);
#pragma unroll
      for (int i = 0; i < V; ++i) vec16_put<T>(u, i, round_to(vec16_get<T>(r, i) + vec16_get<T>(u, i), mode));
      *reinterpret_cast<uint4*>(x + base + j * V) = u;
    }
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float v = vec16_get<T>(u, i);  // as stored
      e[i] += v * v;
    }
    xv[k] = u;
  }
  // warp_sum of the 1024-thread kernel, element i standing for its lane V k + i.
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    if (o >= V) {
#pragma unroll
      for (int i = 0; i < V; ++i) e[i] += shfl_xor(e[i], o / V);
    } else {
      float n[V];
#pragma unroll
      for (int i = 0; i < V; ++i) n[i] = e[i] + e[i ^ o];
#pragma unroll
      for (int i = 0; i < V; ++i) e[i] = n[i];
    }
  }
  constexpr int kPerWarp = kWarp / V;  // threads standing for one warp of the 1024-thread kernel
  if (threadIdx.x % kPerWarp == 0) scratch[threadIdx.x / kPerWarp] = e[0];
  __syncthreads();
  float sum = 0;
  for (int w = 0; w < 1024 / kWarp; ++w) sum += scratch[w];
  const float inv = 1.0f / sqrtf(sum / static_cast<float>(H) + eps);
  if (rstd && threadIdx.x == 0) rstd[blockIdx.x] = inv;
#pragma unroll
  for (int k = 0; k < kVecPer; ++k) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(k) * kThreads;
    if (j >= nv) break;
    uint4 o;
#pragma unroll
    for (int i = 0; i < V; ++i)
      vec16_put<T>(o, i, round_to(vec16_get<T>(wv[k], i) * round_to(vec16_get<T>(xv[k], i) * inv, mode), mode));
    *reinterpret_cast<uint4*>(out + base + j * V) = o;
  }
}

}  // namespace

void rms_norm(const Tensor* add, Tensor& x, const Tensor& weight, double eps, DType dtype, Tensor& out,
              Tensor* rstd) {
  const int64_t H = weight.size(0);
  const int64_t rows = x.numel() / H;
  if (rows == 0) return;
  gpuStream_t s = stream_for(x.device().index);
#if defined(HIPFORMERS_EMULATE_WAVE64)
  const int threads = H >= 256 ? 256 : 64;  // the emulated wavefronts' barriers cover 960 threads
#else
  const int threads = H >= 1024 ? 1024 : H >= 256 ? 256 : 64;
#endif
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Without `add`, x is only read: it may be a read-only view.
    T* xp = add ? static_cast<T*>(x.mutable_raw_data()) : const_cast<T*>(static_cast<const T*>(x.raw_data()));
    const bool vec = H >= kVecRowMin && H % kVec16<T> == 0 && H / kVec16<T> <= kVecThreads<T> * kVecPer &&
                     aligned16(xp) && aligned16(weight.raw_data()) && aligned16(out.raw_data()) &&
                     (!add || aligned16(add->raw_data()));
    launch_dependent(vec ? rms_norm_vec_kernel<T> : rms_norm_kernel<T>, dim3(static_cast<unsigned>(rows)),
        dim3(vec ? kVecThreads<T> : threads), 0, s,
        add ? static_cast<const T*>(add->raw_data()) : nullptr, xp, static_cast<const T*>(weight.raw_data()),
        static_cast<T*>(out.mutable_raw_data()), rstd ? static_cast<float*>(rstd->mutable_raw_data()) : nullptr, H,
        static_cast<float>(eps), round_mode(dtype));
  });
  check_launch("rms_norm");
}

}  // namespace hipformers::kernels::gpu
