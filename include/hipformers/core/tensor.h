// Tensors: a shape, a dtype, a device and shared storage.
//
// Always contiguous and row-major (no strides): every kernel can treat a tensor
// as a flat array, and a view is only ever a reshape or a run of leading rows.
// Storage is a Buffer shared by every tensor that views it. A Buffer either
// owns a 64-byte-aligned allocation (host now; a device Allocator in
// hipformers/runtime/allocator.h adds GPU memory through Buffer::adopt) or
// borrows memory that something else keeps alive, e.g. a memory-mapped
// safetensors file, so weights can be used without a copy.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

#include "hipformers/core/dtype.h"
#include "hipformers/runtime/device.h"  // the Device value type only (header-inline parts)

namespace hipformers {

// Up to kMaxDims int64 dimensions.
class Shape {
 public:
  static constexpr int kMaxDims = 5;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);

  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<std::size_t>(i)]; }
  int64_t numel() const;
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<std::size_t>(ndim_)}; }
  std::string str() const;  // "[2, 3]"
  bool operator==(const Shape& other) const;

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

class Buffer {
 public:
  // 64-byte-aligned host memory (uninitialised). Error(kOutOfMemory) naming the
  // byte count when the allocation fails.
  static std::shared_ptr<Buffer> allocate_host(std::size_t nbytes);
  // Borrowed, read-only memory; `keep_alive` (e.g. a MappedFile or Checkpoint)
  // lives as long as the buffer does.
  static std::shared_ptr<Buffer> borrow(const void* data, std::size_t nbytes, Device device,
                                        std::shared_ptr<const void> keep_alive);
  // Memory allocated elsewhere (a device allocator), released by `release`.
  static std::shared_ptr<Buffer> adopt(void* data, std::size_t nbytes, Device device,
                                       std::function<void(void*)> release);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  const Device& device() const { return device_; }
  bool read_only() const { return read_only_; }

 private:
  Buffer() = default;
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
  bool read_only_ = false;
  std::function<void(void*)> release_;
  std::shared_ptr<const void> keep_alive_;
};

class Tensor {
 public:
  Tensor() = default;
  // New host tensor, uninitialised / zero-filled.
  static Tensor empty(const Shape& shape, DType dtype);
  static Tensor zeros(const Shape& shape, DType dtype);
  // A tensor over existing storage, starting `byte_offset` into it.
  Tensor(std::shared_ptr<Buffer> buffer, const Shape& shape, DType dtype, std::size_t byte_offset = 0);

  const Shape& shape() const { return shape_; }
  int ndim() const { return shape_.ndim(); }
  int64_t size(int dim) const;  // negative dims count from the end
  int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  Device device() const { return buffer_ ? buffer_->device() : Device::cpu(); }
  bool defined() const { return buffer_ != nullptr; }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

  // Raw pointers. mutable_data() throws Error for borrowed (read-only) storage.
  const void* raw_data() const;
  void* mutable_raw_data();
  // Typed access: throws Error(kInvalidInput) if T does not match dtype() or the
  // tensor is not on the host.
  template <typename T> const T* data() const;
  template <typename T> T* mutable_data();

  // Same storage, new shape with the same numel.
  Tensor reshape(const Shape& shape) const;
  // Rows [begin, end) of the first dimension, sharing storage.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // Host copy converted to `dtype` (float types and ints); a fresh buffer even if equal.
  Tensor to(DType dtype) const;
  Tensor clone() const { return to(dtype_); }
  // Copy on `device` (host<->GPU), same dtype and shape; a fresh buffer even
  // when the device is the same. Defined in the runtime library (allocator.cc).
  Tensor to(const Device& device) const;

 private:
  std::shared_ptr<Buffer> buffer_;
  std::size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::kF32;
};

// ---- Host conversions, round-to-nearest-even as torch does -------------------
float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float value);
float f16_to_float(uint16_t bits);
uint16_t float_to_f16(float value);
// The float nearest to `value` that `dtype` can hold (identity for F32):
// what torch does when it stores an fp32 result into a bf16/f16 tensor.
float round_to_dtype(float value, DType dtype);
void round_to_dtype(std::span<float> values, DType dtype);
// Converts `count` elements of a float dtype (F32, BF16, F16, F64, and the
// FP8 F8_E4M3 / F8_E5M2, core/fp8.h) at `src` to float. `src` may be
// unaligned.
void convert_to_float(const void* src, DType dtype, std::size_t count, float* dst);

}  // namespace hipformers
