// Kernel launches with programmatic dependent launch (PDL) where the GPU has
// it (CUDA, sm_90+): the next kernel of a stream may be scheduled while the
// previous one drains, and it runs what does not depend on its predecessor
// (loading weights) before it waits. That hides most of the per-kernel
// launch gap that dominates a small-batch decode step (hundreds of kernels
// of a few microseconds each), inside a captured graph too.
//
// Contract for every kernel launched with launch_dependent():
//   - call grid_dependency_wait() before it reads anything an earlier kernel
//     wrote or writes anything an earlier kernel reads (weights, which no
//     kernel writes, may be read before);
//   - calls allow_dependents() first thing, so the next kernel is scheduled
//     as soon as every block of this one has started (it then still waits
//     in its own grid_dependency_wait() for this one to finish, and so on
//     down the chain: a wait returns only once every earlier kernel is done).
//     A chain of short kernels thus has the next one or two resident and
//     loading their weights while the current one runs. The next kernel is
//     launched only after all of this one's blocks started, so a waiting
//     kernel never holds back one it depends on.
// On HIP and older GPUs both calls compile to nothing and the launch is an
// ordinary stream-ordered one.
#pragma once

#include <cstdlib>
#include <utility>

#include "gpu_types.h"
#include "step_trace.h"

namespace hipformers::kernels::gpu {

// HIPFORMERS_PDL_LATE_TRIGGER (a build-time A/B switch): the trigger moves
// from allow_dependents() to just after the wait, so at most one dependent
// kernel is resident ahead of the running one.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(HIPFORMERS_WITH_CUDA) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;" ::: "memory");
  step_trace(kTraceWaited);
#if defined(HIPFORMERS_PDL_LATE_TRIGGER)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
#endif
}

__device__ __forceinline__ void allow_dependents() {
#if defined(HIPFORMERS_WITH_CUDA) && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && \
    !defined(HIPFORMERS_PDL_LATE_TRIGGER)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  step_trace(kTraceTrigger);
#endif
}

// Brings the 128-byte line holding `p` into L2 without waiting for it.
__device__ __forceinline__ void prefetch_l2_line(const void* p) {
#if defined(HIPFORMERS_WITH_CUDA) && defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

// HIPFORMERS_DISABLE_PDL=1 turns dependent launches into ordinary ones (for
// A/B measurements; the kernels' wait/trigger are then no-ops).
inline bool dependent_launch_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("HIPFORMERS_DISABLE_PDL");
    return !(v && *v && *v != '0');
  }();
  return enabled;
}

// kernel<<<grid, block, shared, stream>>>(args...), as a dependent launch where supported.
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared, gpuStream_t stream,
                      Args&&... args) {
#if defined(HIPFORMERS_WITH_CUDA)
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = dependent_launch_enabled() ? 1 : 0;
  check(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(std::forward<Args>(args))...), "cudaLaunchKernelEx");
#else
  kernel<<<grid, block, shared, stream>>>(static_cast<Params>(std::forward<Args>(args))...);
#endif
}

}  // namespace hipformers::kernels::gpu
