// Per-device state shared by the GPU allocator and the kernels: the stream
// every kernel and copy of a device is queued on, and error checking.
// GPU builds only (included from .cu files and from allocator_gpu.cu).
#pragma once

#include <cstddef>
#include <string>

#include "gpu_runtime.h"

namespace hipformers::gpu {

// Throws hipformers::Error(kRuntime) naming `what` and the runtime's error.
void check(gpuError_t status, const char* what);
// Makes `device` current on this thread and returns its stream. One stream per
// device keeps every kernel and copy in order, which is what lets the caching
// allocator hand a freed block to the next allocation without a sync.
gpuStream_t stream_for(int device);
// Checks the last launch on this thread (configuration errors surface here).
void check_launch(const char* kernel);

}  // namespace hipformers::gpu
