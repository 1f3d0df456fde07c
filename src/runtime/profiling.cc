#include "hipformers/runtime/profiling.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/runtime/allocator.h"

#if defined(HIPFORMERS_WITH_CUDA) || defined(HIPFORMERS_WITH_HIP)
#define HF_PROFILING_GPU 1
#include "gpu/profiling_gpu.h"
#endif

namespace hipformers {
namespace {

#ifndef HF_PROFILING_GPU
[[noreturn]] void no_gpu(const Device& device) {
  throw_error(ErrorKind::kUnsupported, device.str() + ": this build has no GPU backend (use --device cpu)");
}
#endif

std::size_t current_rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

std::size_t peak_rss_bytes() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<std::size_t>(usage.ru_maxrss) * 1024;  // kilobytes on Linux
}

}  // namespace

void synchronize(const Device& device) {
  if (device.is_cpu()) return;
#ifdef HF_PROFILING_GPU
  gpu::synchronize(device.index);
#else
  no_gpu(device);
#endif
}

struct DeviceTimer::Impl {
  Device device;
  std::chrono::steady_clock::time_point start{};
#ifdef HF_PROFILING_GPU
  std::unique_ptr<gpu::Timer> gpu;
#endif
};

DeviceTimer::DeviceTimer(const Device& device) : impl_(std::make_unique<Impl>()) {
  impl_->device = device;
  if (device.is_cpu()) return;
#ifdef HF_PROFILING_GPU
  impl_->gpu = std::make_unique<gpu::Timer>(device.index);
#else
  no_gpu(device);
#endif
}

DeviceTimer::~DeviceTimer() = default;

void DeviceTimer::start() {
#ifdef HF_PROFILING_GPU
  if (impl_->gpu) return impl_->gpu->start();
#endif
  impl_->start = std::chrono::steady_clock::now();
}

double DeviceTimer::stop_ms() {
#ifdef HF_PROFILING_GPU
  if (impl_->gpu) return impl_->gpu->stop_ms();
#endif
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - impl_->start).count();
}

MemoryStats memory_stats(const Device& device) {
  MemoryStats m;
  if (device.is_cpu()) {
    m.host_rss = true;
    m.current_bytes = m.reserved_bytes = current_rss_bytes();
    m.peak_bytes = m.peak_reserved_bytes = std::max(peak_rss_bytes(), m.current_bytes);
    return m;
  }
#ifdef HF_PROFILING_GPU
  allocator_for(device);  // validates the index
  const gpu::AllocatorStats s = gpu::allocator_stats(device.index);
  m.current_bytes = s.current;
  m.peak_bytes = s.peak;
  m.reserved_bytes = s.reserved;
  m.peak_reserved_bytes = s.peak_reserved;
  return m;
#else
  no_gpu(device);
#endif
}

std::size_t available_memory(const Device& device) {
  if (device.is_cpu()) {
    std::ifstream meminfo("/proc/meminfo");
    for (std::string line; std::getline(meminfo, line);) {
      if (line.rfind("MemAvailable:", 0) != 0) continue;
      std::size_t kib = 0;
      if (std::sscanf(line.c_str(), "MemAvailable: %zu kB", &kib) == 1) return kib * 1024;
    }
    return static_cast<std::size_t>(::sysconf(_SC_AVPHYS_PAGES)) * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  }
#ifdef HF_PROFILING_GPU
  allocator_for(device);  // validates the index
  return gpu::available_memory(device.index);
#else
  no_gpu(device);
#endif
}

void reset_peak_memory_stats(const Device& device) {
  if (device.is_cpu()) return;
#ifdef HF_PROFILING_GPU
  allocator_for(device);
  gpu::reset_allocator_peaks(device.index);
#else
  no_gpu(device);
#endif
}

double measure_copy_bandwidth(const Device& device, std::size_t bytes, int repeats) {
  if (bytes == 0) throw_invalid("copy bandwidth: the buffer size must be > 0 bytes");
  if (repeats < 1) throw_invalid("copy bandwidth: repeats must be >= 1");
  Allocator& allocator = allocator_for(device);
  auto src = allocator.allocate(bytes);
  auto dst = allocator.allocate(bytes);
  if (device.is_cpu()) {  // touch every page first: page faults are not bandwidth
    std::memset(src->data(), 1, bytes);
    std::memset(dst->data(), 0, bytes);
  }
  DeviceTimer timer(device);
  copy_bytes(dst->data(), device, src->data(), device, bytes);  // untimed warm-up
  synchronize(device);
  std::vector<double> rates;
  for (int i = 0; i < repeats; ++i) {
    timer.start();
    copy_bytes(dst->data(), device, src->data(), device, bytes);
    const double ms = timer.stop_ms();
    rates.push_back(2.0 * static_cast<double>(bytes) / std::max(ms, 1e-6) * 1e3);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace hipformers
