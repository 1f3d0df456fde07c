// Measuring the runtime: a timer that times device work (GPU events on the
// device's stream; std::chrono after the work on the CPU), device memory in use
// and its peak (the GPU caching allocator's counters; peak RSS on the CPU), and
// the copy bandwidth a device reaches, the ceiling memory-bound kernels are
// judged against. Used by the benchmark (hipformers bench).
#pragma once

#include <cstddef>
#include <memory>

#include "hipformers/runtime/device.h"

namespace hipformers {

// Waits until every operation queued on `device` has finished (no-op on the CPU).
void synchronize(const Device& device);

// Times the work queued on `device` between start() and stop().
class DeviceTimer {
 public:
  explicit DeviceTimer(const Device& device);
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;
  void start();
  // Waits for the work queued since start() and returns its duration in milliseconds.
  double stop_ms();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

struct MemoryStats {
  // GPU: bytes of live buffers (rounded as allocated) and their peak since the
  // last reset; reserved = held from the driver, including the allocator's cache.
  // CPU: current/peak resident set size of the process; the peak cannot be reset.
  std::size_t current_bytes = 0;
  std::size_t peak_bytes = 0;
  std::size_t reserved_bytes = 0;
  std::size_t peak_reserved_bytes = 0;
  bool host_rss = false;  // true when the numbers are the process's RSS (CPU)
};
MemoryStats memory_stats(const Device& device);
// Bytes new allocations on `device` can still get: on a GPU the driver's free
// memory plus what the caching allocator holds idle; on the CPU the kernel's
// MemAvailable. Used to size caches (e.g. the KV cache of a batched run).
std::size_t available_memory(const Device& device);

// Starts the peak counters again from the current values (GPU only; the CPU's peak RSS cannot be reset).
void reset_peak_memory_stats(const Device& device);

// Copies a `bytes`-byte buffer to another on `device` (device-to-device on a
// GPU, memcpy on the CPU) `repeats` times after one untimed copy, and returns
// the median of (bytes read + bytes written) / time, in bytes per second.
// Error(kInvalidInput) for bytes == 0 or repeats < 1.
double measure_copy_bandwidth(const Device& device, std::size_t bytes, int repeats = 5);

}  // namespace hipformers
