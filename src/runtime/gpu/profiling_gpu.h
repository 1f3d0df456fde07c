// The GPU side of hipformers/runtime/profiling.h, callable from plain C++
// (no GPU runtime header): events and allocator counters per device.
#pragma once

#include <cstddef>

namespace hipformers::gpu {

void synchronize(int device);

// Two events on the device's stream.
class Timer {
 public:
  explicit Timer(int device);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  void start();
  double stop_ms();  // waits for the stop event

 private:
  int device_;
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

struct AllocatorStats {
  std::size_t current = 0, peak = 0, reserved = 0, peak_reserved = 0;
};
// The caching allocator's counters (allocator_gpu.cu).
AllocatorStats allocator_stats(int device);
// Driver free memory plus the caching allocator's idle blocks.
std::size_t available_memory(int device);
void reset_allocator_peaks(int device);

}  // namespace hipformers::gpu
