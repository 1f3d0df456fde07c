// argmax_rows on the GPU. A row of V logits is split into chunks of
// kArgmaxChunk elements, one 256-thread block each (16-byte loads), so even a
// single 151936-wide row spreads over ~37 SMs. Every element becomes a 64-bit
// key, (order-preserving bits of the value) << 32 | (0xffffffff - index),
// with NaN above +inf and -0 folded to +0, so the largest key is exactly
// argmax()'s answer (first index on ties, first NaN wins). Blocks of a row
// combine with atomicMax into a static per-row slot; the last block of the
// row (a ticket counter) writes the id and resets the slot and counter to 0
// for the next launch. No allocation, no sync: capturable in a graph.
#include <algorithm>

#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/launch.h"
#include "gpu/argmax_key.h"
#include "gpu/vec16.h"

namespace hipformers::kernels::gpu {
namespace {

constexpr int kArgmaxThreads = 256;
constexpr int64_t kArgmaxChunk = 4096;  // elements per block (a multiple of every vector width)
constexpr int kArgmaxMaxRows = 1024;    // rows per launch (size of the static slots)

// Zero at module load; every launch leaves them zero again.
__device__ unsigned long long g_argmax_best[kArgmaxMaxRows];
__device__ unsigned int g_argmax_done[kArgmaxMaxRows];

// grid (chunks, rows of this launch); `row0` is the first row.
template <typename T, bool kVec>
__global__ void __launch_bounds__(kArgmaxThreads) argmax_rows_kernel(const T* __restrict__ logits, int32_t* ids,
                                                                     int64_t V, int64_t row0) {
  StepTraceScope trace_scope;
  allow_dependents();
  grid_dependency_wait();  // launched dependent (gpu/launch.h)
  const int slot = static_cast<int>(blockIdx.y);
  const int64_t row = row0 + slot;
  const T* x = logits + row * V;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kArgmaxChunk;
  const int64_t end = begin + kArgmaxChunk < V ? begin + kArgmaxChunk : V;
  unsigned long long best = 0;  // below every real key
  if constexpr (kVec) {
    constexpr int E = kVec16<T>;
#pragma unroll 4
    for (int64_t j = begin / E + threadIdx.x; j < end / E; j += kArgmaxThreads) {
      const uint4 raw = *reinterpret_cast<const uint4*>(x + j * E);
#pragma unroll
      for (int e = 0; e < E; ++e) best = max_u64(best, argmax_key(vec16_get<T>(raw, e), j * E + e));
    }
  } else {
    for (int64_t i = begin + threadIdx.x; i < end; i += kArgmaxThreads) best = max_u64(best, argmax_key(load(x + i), i));
  }
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) best = max_u64(best, shfl_xor_u64(best, o));
  __shared__ unsigned long long warp_best[kArgmaxThreads / 32];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) warp_best[warp] = best;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kArgmaxThreads / kWarp; ++w) best = max_u64(best, warp_best[w]);
  if (gridDim.x == 1) {
    ids[row] = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(best));
    return;
  }
  atomicMax(&g_argmax_best[slot], best);
  __threadfence();
  if (atomicAdd(&g_argmax_done[slot], 1u) == gridDim.x - 1) {  // the row's last block
    __threadfence();
    const unsigned long long total = atomicExch(&g_argmax_best[slot], 0ull);
    g_argmax_done[slot] = 0;
    ids[row] = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(total));
  }
}

}  // namespace

void argmax_rows(const Tensor& logits, Tensor& ids) {
  const int64_t B = logits.size(0), V = logits.size(1);
  if (B == 0) return;
  gpuStream_t s = stream_for(logits.device().index);
  const auto chunks = static_cast<unsigned>((V + kArgmaxChunk - 1) / kArgmaxChunk);
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const bool vec = V % kVec16<T> == 0 && aligned16(logits.raw_data());
    const auto* x = static_cast<const T*>(logits.raw_data());
    auto* out = static_cast<int32_t*>(ids.mutable_raw_data());
    // Launches of at most kArgmaxMaxRows rows, one after the other on the
    // stream (each leaves the static slots clean for the next).
    for (int64_t row0 = 0; row0 < B; row0 += kArgmaxMaxRows) {
      const dim3 grid(chunks, static_cast<unsigned>(std::min<int64_t>(kArgmaxMaxRows, B - row0)));
      if (vec) launch_dependent(argmax_rows_kernel<T, true>, grid, dim3(kArgmaxThreads), 0, s, x, out, V, row0);
      else launch_dependent(argmax_rows_kernel<T, false>, grid, dim3(kArgmaxThreads), 0, s, x, out, V, row0);
    }
  });
  check_launch("argmax_rows");
}

}  // namespace hipformers::kernels::gpu
