// HostStaging: plain memory and immediate copies on the CPU; page-locked
// memory and stream-ordered copies on a GPU (gpu/staging_gpu.cu).
#include "hipformers/runtime/staging.h"

#include <cstring>
#include <string>
#include <vector>

#include "hipformers/core/error.h"

#if defined(HIPFORMERS_WITH_CUDA) || defined(HIPFORMERS_WITH_HIP)
#include "gpu/staging_gpu.h"
#define HF_STAGING_GPU 1
#endif

namespace hipformers {

struct HostStaging::Impl {
  Device device;
  std::size_t bytes = 0;
  std::vector<unsigned char> host;  // CPU
  void* pinned = nullptr;           // GPU
  void* event = nullptr;
  bool queued = false;  // a transfer was queued since the last wait()

  ~Impl() {
#ifdef HF_STAGING_GPU
    if (event) {
      if (queued) {
        try {
          gpu::event_wait(event);  // the copy engine may still read or write the buffer
        } catch (...) {
        }
      }
      gpu::event_destroy(event);
    }
    gpu::host_pinned_free(pinned);
#endif
  }
};

HostStaging::HostStaging(const Device& device, std::size_t bytes) : impl_(std::make_unique<Impl>()) {
  impl_->device = device;
  impl_->bytes = bytes;
  if (device.is_cpu()) {
    impl_->host.resize(bytes);
    return;
  }
#ifdef HF_STAGING_GPU
  impl_->event = gpu::event_create(device.index);
  impl_->pinned = gpu::host_pinned_alloc(bytes == 0 ? 1 : bytes);
#else
  throw_error(ErrorKind::kUnsupported, device.str() + ": this build has no GPU backend (use --device cpu)");
#endif
}

HostStaging::~HostStaging() = default;

std::size_t HostStaging::size() const { return impl_->bytes; }
void* HostStaging::data() { return impl_->device.is_cpu() ? impl_->host.data() : impl_->pinned; }
const void* HostStaging::data() const { return impl_->device.is_cpu() ? impl_->host.data() : impl_->pinned; }

// n bytes from src to dst, one of which is the buffer: at once on the CPU,
// queued on the device's stream on a GPU.
static void transfer(HostStaging::Impl& impl, void* dst, const void* src, std::size_t n, bool to_device) {
  if (n > impl.bytes)
    throw_invalid("a staging transfer of " + std::to_string(n) + " bytes exceeds the buffer's " +
                  std::to_string(impl.bytes));
  if (n == 0) return;
  if (impl.device.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
#ifdef HF_STAGING_GPU
  gpu::copy_async_then_record(dst, src, n, to_device, impl.device.index, impl.event);
  impl.queued = true;
#else
  (void)to_device;
#endif
}

void HostStaging::upload(void* dst, std::size_t n) { transfer(*impl_, dst, data(), n, true); }
void HostStaging::download(const void* src, std::size_t n) { transfer(*impl_, data(), src, n, false); }

void HostStaging::wait() const {
#ifdef HF_STAGING_GPU
  if (impl_->queued) {
    gpu::event_wait(impl_->event);
    impl_->queued = false;
  }
#endif
}

}  // namespace hipformers
