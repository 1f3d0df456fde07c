#include "hipformers/runtime/allocator.h"

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
  // GPU memory arrives with the GPU kernels; until then say so plainly.
  throw_error(ErrorKind::kUnsupported, "no memory allocator for " + device.str() +
                                           " yet: this build runs models on the CPU only (use --device cpu)");
}

Tensor empty_tensor(const Shape& shape, DType dtype, const Device& device) {
  std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  return Tensor(allocator_for(device).allocate(bytes), shape, dtype);
}

}  // namespace hipformers
