// Page-locked host memory and stream-ordered copies (staging_gpu.h).
#include <string>

#include "gpu_context.h"
#include "hipformers/core/error.h"
#include "staging_gpu.h"

#if defined(HIPFORMERS_WITH_HIP)
#define gpuHostAllocPinned(p, n) hipHostMalloc(p, n, hipHostMallocDefault)
#define gpuHostFreePinned hipHostFree
#define gpuEventCreateWithFlags hipEventCreateWithFlags
#define gpuEventDisableTiming hipEventDisableTiming
#else
#define gpuHostAllocPinned(p, n) cudaMallocHost(p, n)
#define gpuHostFreePinned cudaFreeHost
#define gpuEventCreateWithFlags cudaEventCreateWithFlags
#define gpuEventDisableTiming cudaEventDisableTiming
#endif

namespace hipformers::gpu {

void* host_pinned_alloc(std::size_t bytes) {
  void* p = nullptr;
  if (gpuHostAllocPinned(&p, bytes) != gpuSuccess || !p) {
    (void)gpuGetLastError();
    throw_error(ErrorKind::kOutOfMemory, "could not allocate " + std::to_string(bytes) + " bytes of page-locked host memory");
  }
  return p;
}

void host_pinned_free(void* p) {
  if (p) (void)gpuHostFreePinned(p);
}

void* event_create(int device) {
  stream_for(device);  // makes the device current: the event belongs to it
  gpuEvent_t e = nullptr;
  check(gpuEventCreateWithFlags(&e, gpuEventDisableTiming), "gpuEventCreateWithFlags");
  return e;
}

void event_destroy(void* event) {
  if (event) (void)gpuEventDestroy(static_cast<gpuEvent_t>(event));
}

void copy_async_then_record(void* dst, const void* src, std::size_t n, bool to_device, int device, void* event) {
  gpuStream_t s = stream_for(device);
  check(gpuMemcpyAsync(dst, src, n, to_device ? gpuMemcpyHostToDevice : gpuMemcpyDeviceToHost, s), "gpuMemcpyAsync");
  check(gpuEventRecord(static_cast<gpuEvent_t>(event), s), "gpuEventRecord");
}

void event_wait(void* event) { check(gpuEventSynchronize(static_cast<gpuEvent_t>(event)), "gpuEventSynchronize"); }

}  // namespace hipformers::gpu
