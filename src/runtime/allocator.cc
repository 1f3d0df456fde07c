#include "hipformers/runtime/allocator.h"

#include <cstring>

#include "hipformers/core/error.h"

namespace hipformers {
namespace {

class HostAllocator final : public Allocator {
 public:
  std::shared_ptr<Buffer> allocate(std::size_t nbytes) override { return Buffer::allocate_host(nbytes); }
  Device device() const override { return Device::cpu(); }
};

}  // namespace

Allocator& host_allocator() {
  static HostAllocator allocator;
  return allocator;
}

Allocator& allocator_for(const Device& device) {
  if (device.is_cpu()) return host_allocator();
#if defined(HIPFORMERS_WITH_CUDA) || defined(HIPFORMERS_WITH_HIP)
  if (device.index < 0 || device.index >= gpu_count())
    throw_invalid("no GPU " + device.str() + ": " + std::to_string(gpu_count()) + " visible");
  return gpu_allocator(device.index);
#else
  throw_error(ErrorKind::kUnsupported, "no memory allocator for " + device.str() +
                                           ": this build has no GPU backend (use --device cpu)");
#endif
}

Tensor empty_tensor(const Shape& shape, DType dtype, const Device& device) {
  std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  return Tensor(allocator_for(device).allocate(bytes), shape, dtype);
}

#if !defined(HIPFORMERS_WITH_CUDA) && !defined(HIPFORMERS_WITH_HIP)
void copy_bytes(void* dst, const Device& dst_device, const void* src, const Device& src_device, std::size_t n) {
  if (!dst_device.is_cpu() || !src_device.is_cpu())
    throw_error(ErrorKind::kUnsupported, "copy to or from " + (dst_device.is_cpu() ? src_device : dst_device).str() +
                                             ": this build has no GPU backend");
  if (n) std::memcpy(dst, src, n);
}
#endif

// Declared in tensor.h; defined here because moving memory between devices
// needs the runtime, which the core library does not link.
Tensor Tensor::to(const Device& device) const {
  Tensor out = empty_tensor(shape_, dtype_, device);
  copy_bytes(out.mutable_raw_data(), device, raw_data(), this->device(), nbytes());
  return out;
}

}  // namespace hipformers
