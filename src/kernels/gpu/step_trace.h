// A timeline of the kernels of one decode step as the GPU ran them, for
// finding where a step's time goes inside a graph replay (where profilers see
// one graph, or serialise its kernels). Built only with the CMake option
// HIPFORMERS_STEP_TRACE=ON (CUDA): otherwise every call here is empty.
//
// Thread 0 of each block writes (gridid, %globaltimer, clock64, event | smid
// | block | grid size) at its start (StepTraceScope), when it lets dependents
// launch (allow_dependents), when its dependency wait returns and at its end.
// %globaltimer is one clock for the whole GPU but coarse on some parts;
// clock64 is fine but per SM: bench/step_trace.py aligns each SM's clock64
// to the global timer over all of its records. The host arms the buffer for
// one step and writes it out (kernels/step_trace.h, step_trace_gpu.cu).
#pragma once

#include <cstdint>

#include "gpu_types.h"

namespace hipformers::kernels::gpu {

enum StepTraceEvent : unsigned { kTraceBegin = 0, kTraceTrigger = 1, kTraceWaited = 2, kTraceEnd = 3 };

#if defined(HIPFORMERS_STEP_TRACE) && defined(HIPFORMERS_WITH_CUDA)
// Slots are fixed, so recording takes no atomic (whose round trip would
// sit on the traced kernels' critical path): record (kernel, block, event)
// goes to slot ((gridid % kTraceKernels) * kTraceBlocks + block) * 4 + event,
// gridids of one step being consecutive. Blocks >= kTraceBlocks are not recorded.
constexpr unsigned kTraceKernels = 1024, kTraceBlocks = 512;
struct StepTraceBuffer {
  unsigned long long* records = nullptr;  // 4 words per record
};

// One copy per translation unit (no relocatable device code); each unit
// registers a setter so the host arms all of them.
static __device__ StepTraceBuffer hf_step_trace_buffer;

__device__ __forceinline__ void step_trace(unsigned event) {
  if (threadIdx.x != 0 || threadIdx.y != 0 || threadIdx.z != 0) return;
  unsigned long long now, grid;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  const long long clk = clock64();
  asm("mov.u64 %0, %%gridid;" : "=l"(grid));
  unsigned sm;
  asm("mov.u32 %0, %%smid;" : "=r"(sm));
  const StepTraceBuffer t = hf_step_trace_buffer;
  const unsigned block = blockIdx.x + blockIdx.y * gridDim.x;
  if (t.records == nullptr || block >= kTraceBlocks) return;
  unsigned long long* r = t.records + 4ull * ((grid % kTraceKernels * kTraceBlocks + block) * 4 + event);
  r[0] = grid;
  r[1] = now;
  r[2] = static_cast<unsigned long long>(clk);
  r[3] = static_cast<unsigned long long>(event) | (static_cast<unsigned long long>(sm & 0xfffu) << 4) |
         (static_cast<unsigned long long>(block) << 16) |
         (static_cast<unsigned long long>(gridDim.x * gridDim.y) << 40);
}

void step_trace_register(void (*set)(const StepTraceBuffer&));
namespace {
void step_trace_set_this_unit(const StepTraceBuffer& b) { cudaMemcpyToSymbol(hf_step_trace_buffer, &b, sizeof b); }
[[maybe_unused]] const int step_trace_registered = (step_trace_register(&step_trace_set_this_unit), 0);
}  // namespace
#else
__device__ __forceinline__ void step_trace(unsigned) {}
#endif

// Records the block's begin and end (the kernel's first statement).
struct StepTraceScope {
  __device__ __forceinline__ StepTraceScope() { step_trace(kTraceBegin); }
  __device__ __forceinline__ ~StepTraceScope() { step_trace(kTraceEnd); }
};

}  // namespace hipformers::kernels::gpu
