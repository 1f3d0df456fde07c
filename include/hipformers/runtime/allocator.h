// Where tensor memory comes from. The host allocator is the CPU reference;
// a GPU build adds a device allocator (gpuMalloc, later a caching pool) in
// src/runtime/gpu/allocator_gpu.cu returning Buffer::adopt(...) buffers, and
// allocator_for() picks it for GPU devices. Kernels never allocate directly.
#pragma once

#include <cstddef>
#include <memory>

#include "hipformers/core/tensor.h"
#include "hipformers/runtime/device.h"

namespace hipformers {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Error(kOutOfMemory) naming the byte count (and device) on failure.
  virtual std::shared_ptr<Buffer> allocate(std::size_t nbytes) = 0;
  virtual Device device() const = 0;
};

// The process-wide 64-byte-aligned host allocator.
Allocator& host_allocator();
// The allocator for `device`; Error(kUnsupported) for a device this build has
// no allocator for.
Allocator& allocator_for(const Device& device);

// An uninitialised tensor on `device`.
Tensor empty_tensor(const Shape& shape, DType dtype, const Device& device);

// Copies `n` bytes between any two devices (host<->GPU, GPU<->GPU on one
// device's stream). Returns once host memory involved may be reused.
void copy_bytes(void* dst, const Device& dst_device, const void* src, const Device& src_device, std::size_t n);

#if defined(HIPFORMERS_WITH_CUDA) || defined(HIPFORMERS_WITH_HIP)
// The caching device allocator of GPU `device` (src/runtime/gpu/allocator_gpu.cu).
Allocator& gpu_allocator(int device);
#endif

}  // namespace hipformers
