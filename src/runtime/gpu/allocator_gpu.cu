// Device memory: gpuMalloc behind a per-device caching free-list, the
// per-device stream, and host<->device copies.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gpu_context.h"
#include "hipformers/core/error.h"
#include "hipformers/runtime/allocator.h"
#include "profiling_gpu.h"

namespace hipformers {
namespace gpu {

void check(gpuError_t status, const char* what) {
  if (status == gpuSuccess) return;
  throw_error(ErrorKind::kRuntime,
              std::string(what) + " failed: " + gpuGetErrorName(status) + " (" + gpuGetErrorString(status) + ")");
}

void check_launch(const char* kernel) { check(gpuGetLastError(), kernel); }

namespace {
constexpr int kMaxDevices = 64;

void set_device(int device) {
  int current = -1;
  check(gpuGetDevice(&current), "gpuGetDevice");
  if (current != device) check(gpuSetDevice(device), "gpuSetDevice");
}
}  // namespace

gpuStream_t stream_for(int device) {
  if (device < 0 || device >= kMaxDevices) throw_invalid("GPU index " + std::to_string(device) + " out of range");
  static std::mutex mutex;
  static gpuStream_t streams[kMaxDevices] = {};
  static bool created[kMaxDevices] = {};
  set_device(device);
  std::lock_guard<std::mutex> lock(mutex);
  if (!created[device]) {
    check(gpuStreamCreateWithFlags(&streams[device], gpuStreamNonBlocking), "gpuStreamCreate");
    created[device] = true;
  }
  return streams[device];
}

namespace {

// Freed blocks are kept by size and handed out again; since every use of a
// device's memory is ordered on its one stream, a block freed on the host
// while kernels that read it are still queued is only reused by work queued
// after them. On an allocation failure the cache is returned to the driver
// and the allocation retried once.
class CachingGpuAllocator final : public Allocator {
 public:
  explicit CachingGpuAllocator(int device) : device_(device) {}

  std::shared_ptr<Buffer> allocate(std::size_t nbytes) override {
    const std::size_t size = round_up(nbytes);
    void* p = take_cached(size);
    if (!p) p = fresh(size, nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      current_ += size;
      peak_ = std::max(peak_, current_);
    }
    return Buffer::adopt(p, nbytes, Device::gpu(device_), [this, size](void* q) { give_back(q, size); });
  }
  Device device() const override { return Device::gpu(device_); }

  AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {current_, peak_, reserved_, peak_reserved_};
  }
  void reset_peaks() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_ = current_;
    peak_reserved_ = reserved_;
  }

 private:
  // Small blocks round to 512 bytes, large ones to 2 MiB, so repeated
  // forward passes with growing lengths still hit the cache.
  static std::size_t round_up(std::size_t n) {
    const std::size_t unit = n < (std::size_t{1} << 20) ? 512 : (std::size_t{2} << 20);
    return n == 0 ? unit : (n + unit - 1) / unit * unit;
  }

  void* take_cached(std::size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.lower_bound(size);
    // A block at most twice the request: larger ones would waste memory.
    if (it == free_.end() || it->first > 2 * size) return nullptr;
    void* p = it->second;
    free_.erase(it);
    return p;
  }

  void* fresh(std::size_t size, std::size_t requested) {
    stream_for(device_);  // makes the device current
    void* p = nullptr;
    if (gpuMalloc(&p, size) == gpuSuccess) return reserved(p, size);
    (void)gpuGetLastError();
    release_cache();
    if (gpuMalloc(&p, size) == gpuSuccess) return reserved(p, size);
    (void)gpuGetLastError();
    std::size_t free_bytes = 0, total_bytes = 0;
    (void)gpuMemGetInfo(&free_bytes, &total_bytes);
    throw_error(ErrorKind::kOutOfMemory, "out of GPU memory on " + Device::gpu(device_).str() + " allocating " +
                                             std::to_string(requested) + " bytes (" + std::to_string(free_bytes) +
                                             " free of " + std::to_string(total_bytes) + " bytes)");
  }

  void* reserved(void* p, std::size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    reserved_ += size;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    return p;
  }

  void release_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return;
    check(gpuStreamSynchronize(stream_for(device_)), "gpuStreamSynchronize");
    for (auto& [size, p] : free_) {
      (void)gpuFree(p);
      reserved_ -= size;
    }
    free_.clear();
  }

  void give_back(void* p, std::size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.emplace(size, p);
    current_ -= size;
  }

  int device_;
  std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;
  // Bytes handed out (as rounded) and held from the driver, with their peaks.
  std::size_t current_ = 0, peak_ = 0, reserved_ = 0, peak_reserved_ = 0;
};

}  // namespace
}  // namespace gpu

namespace {
gpu::CachingGpuAllocator& caching_allocator(int device) {
  static std::mutex mutex;
  // Never destroyed: buffers released during static destruction still find it.
  static auto* allocators = new std::map<int, gpu::CachingGpuAllocator*>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& a = (*allocators)[device];
  if (!a) a = new gpu::CachingGpuAllocator(device);
  return *a;
}
}  // namespace

Allocator& gpu_allocator(int device) { return caching_allocator(device); }

namespace gpu {
AllocatorStats allocator_stats(int device) { return caching_allocator(device).stats(); }
std::size_t available_memory(int device) {
  stream_for(device);  // makes the device current
  std::size_t free_bytes = 0, total_bytes = 0;
  check(gpuMemGetInfo(&free_bytes, &total_bytes), "gpuMemGetInfo");
  const AllocatorStats s = caching_allocator(device).stats();
  return free_bytes + (s.reserved > s.current ? s.reserved - s.current : 0);
}
void reset_allocator_peaks(int device) { caching_allocator(device).reset_peaks(); }
}  // namespace gpu

void copy_bytes(void* dst, const Device& dst_device, const void* src, const Device& src_device, std::size_t n) {
  if (n == 0) return;
  if (!dst_device.is_gpu() && !src_device.is_gpu()) {  // host to host: no GPU involved (none may exist)
    std::memcpy(dst, src, n);
    return;
  }
  const int device = dst_device.is_gpu() ? dst_device.index : src_device.index;
  gpuStream_t s = gpu::stream_for(device);
  const auto kind = dst_device.is_gpu() ? (src_device.is_gpu() ? gpuMemcpyDeviceToDevice : gpuMemcpyHostToDevice)
                                        : gpuMemcpyDeviceToHost;
  gpu::check(gpuMemcpyAsync(dst, src, n, kind, s), "gpuMemcpyAsync");
  // Host memory may be freed or read as soon as this returns.
  if (!dst_device.is_gpu() || !src_device.is_gpu()) gpu::check(gpuStreamSynchronize(s), "gpuStreamSynchronize");
}

}  // namespace hipformers
