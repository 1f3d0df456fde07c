// gpu::Timer and gpu::synchronize (profiling_gpu.h): events recorded on the
// device's one stream, so they bracket exactly the work queued between them.
#include "gpu_context.h"
#include "profiling_gpu.h"

namespace hipformers::gpu {

void synchronize(int device) { check(gpuStreamSynchronize(stream_for(device)), "gpuStreamSynchronize"); }

Timer::Timer(int device) : device_(device) {
  stream_for(device_);  // makes the device current: events belong to it
  gpuEvent_t a = nullptr, b = nullptr;
  check(gpuEventCreate(&a), "gpuEventCreate");
  const gpuError_t status = gpuEventCreate(&b);
  if (status != gpuSuccess) (void)gpuEventDestroy(a);
  check(status, "gpuEventCreate");
  start_ = a;
  stop_ = b;
}

Timer::~Timer() {
  (void)gpuEventDestroy(static_cast<gpuEvent_t>(start_));
  (void)gpuEventDestroy(static_cast<gpuEvent_t>(stop_));
}

void Timer::start() { check(gpuEventRecord(static_cast<gpuEvent_t>(start_), stream_for(device_)), "gpuEventRecord"); }

double Timer::stop_ms() {
  auto stop = static_cast<gpuEvent_t>(stop_);
  check(gpuEventRecord(stop, stream_for(device_)), "gpuEventRecord");
  check(gpuEventSynchronize(stop), "gpuEventSynchronize");
  float ms = 0;
  check(gpuEventElapsedTime(&ms, static_cast<gpuEvent_t>(start_), stop), "gpuEventElapsedTime");
  return ms;
}

}  // namespace hipformers::gpu
