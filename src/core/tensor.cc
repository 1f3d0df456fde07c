#include "hipformers/core/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "hipformers/core/error.h"
#include "hipformers/core/fp8.h"

namespace hipformers {

// ---- Shape -------------------------------------------------------------------

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  if (dims.size() > static_cast<std::size_t>(kMaxDims))
    throw_invalid("tensor shape has " + std::to_string(dims.size()) + " dimensions; at most " +
                  std::to_string(kMaxDims) + " are supported");
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) throw_invalid("tensor shape has a negative dimension " + std::to_string(dims[i]));
    dims_[i] = dims[i];
  }
  ndim_ = static_cast<int>(dims.size());
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= dims_[static_cast<std::size_t>(i)];
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < ndim_; ++i) s += (i ? ", " : "") + std::to_string(dims_[static_cast<std::size_t>(i)]);
  return s + "]";
}

bool Shape::operator==(const Shape& other) const {
  if (ndim_ != other.ndim_) return false;
  for (int i = 0; i < ndim_; ++i)
    if (dims_[static_cast<std::size_t>(i)] != other.dims_[static_cast<std::size_t>(i)]) return false;
  return true;
}

// ---- Buffer ------------------------------------------------------------------

std::shared_ptr<Buffer> Buffer::allocate_host(std::size_t nbytes) {
  constexpr std::size_t kAlign = 64;  // a cache line; AVX-512 loads never split
  std::size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
  if (rounded < nbytes) throw_error(ErrorKind::kOutOfMemory, "cannot allocate " + std::to_string(nbytes) + " bytes");
  void* p = rounded == 0 ? nullptr : std::aligned_alloc(kAlign, rounded);
  if (rounded != 0 && p == nullptr)
    throw_error(ErrorKind::kOutOfMemory, "out of host memory allocating " + std::to_string(nbytes) + " bytes");
  auto b = std::shared_ptr<Buffer>(new Buffer());
  b->data_ = p;
  b->nbytes_ = nbytes;
  b->device_ = Device::cpu();
  b->release_ = [](void* q) { std::free(q); };
  return b;
}

std::shared_ptr<Buffer> Buffer::borrow(const void* data, std::size_t nbytes, Device device,
                                       std::shared_ptr<const void> keep_alive) {
  auto b = std::shared_ptr<Buffer>(new Buffer());
  b->data_ = const_cast<void*>(data);  // never written: read_only_ guards mutable access
  b->nbytes_ = nbytes;
  b->device_ = device;
  b->read_only_ = true;
  b->keep_alive_ = std::move(keep_alive);
  return b;
}

std::shared_ptr<Buffer> Buffer::adopt(void* data, std::size_t nbytes, Device device,
                                      std::function<void(void*)> release) {
  auto b = std::shared_ptr<Buffer>(new Buffer());
  b->data_ = data;
  b->nbytes_ = nbytes;
  b->device_ = device;
  b->release_ = std::move(release);
  return b;
}

Buffer::~Buffer() {
  if (release_ && data_) release_(data_);
}

// ---- Tensor ------------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  auto bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  return Tensor(Buffer::allocate_host(bytes), shape, dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (t.nbytes()) std::memset(t.mutable_raw_data(), 0, t.nbytes());
  return t;
}

Tensor::Tensor(std::shared_ptr<Buffer> buffer, const Shape& shape, DType dtype, std::size_t byte_offset)
    : buffer_(std::move(buffer)), offset_(byte_offset), shape_(shape), dtype_(dtype) {
  if (!buffer_) throw_invalid("tensor over a null buffer");
  std::size_t need = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  if (byte_offset > buffer_->nbytes() || buffer_->nbytes() - byte_offset < need)
    throw_invalid("tensor of shape " + shape.str() + " " + dtype_name(dtype) + " needs " + std::to_string(need) +
                  " bytes at offset " + std::to_string(byte_offset) + " but the buffer holds " +
                  std::to_string(buffer_->nbytes()));
}

int64_t Tensor::size(int dim) const {
  int d = dim < 0 ? dim + ndim() : dim;
  if (d < 0 || d >= ndim())
    throw_invalid("dimension " + std::to_string(dim) + " out of range for shape " + shape_.str());
  return shape_[d];
}

const void* Tensor::raw_data() const {
  if (!buffer_) return nullptr;
  return static_cast<const std::byte*>(buffer_->data()) + offset_;
}

void* Tensor::mutable_raw_data() {
  if (!buffer_) return nullptr;
  if (buffer_->read_only()) throw_invalid("tensor is a read-only view (e.g. of a mapped weights file)");
  return static_cast<std::byte*>(buffer_->data()) + offset_;
}

namespace {
// Device::str() lives in the runtime library, which core must not link.
std::string device_name(const Device& d) { return d.is_cpu() ? "cpu" : "cuda:" + std::to_string(d.index); }

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kF32; }
template <> constexpr DType dtype_of<double>() { return DType::kF64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::kI32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::kI64; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::kBF16; }  // also F16, checked below

template <typename T> void check_access(const Tensor& t) {
  bool ok = std::is_same_v<T, uint16_t> ? (t.dtype() == DType::kBF16 || t.dtype() == DType::kF16)
                                        : t.dtype() == dtype_of<T>();
  if (!ok) throw_invalid(std::string("tensor of dtype ") + dtype_name(t.dtype()) + " accessed as another type");
  if (!t.device().is_cpu()) throw_invalid("tensor on " + device_name(t.device()) + " accessed from the host");
}
}  // namespace

template <typename T> const T* Tensor::data() const {
  check_access<T>(*this);
  return static_cast<const T*>(raw_data());
}
template <typename T> T* Tensor::mutable_data() {
  check_access<T>(*this);
  return static_cast<T*>(mutable_raw_data());
}
template const float* Tensor::data<float>() const;
template const double* Tensor::data<double>() const;
template const int32_t* Tensor::data<int32_t>() const;
template const int64_t* Tensor::data<int64_t>() const;
template const uint16_t* Tensor::data<uint16_t>() const;
template float* Tensor::mutable_data<float>();
template double* Tensor::mutable_data<double>();
template int32_t* Tensor::mutable_data<int32_t>();
template int64_t* Tensor::mutable_data<int64_t>();
template uint16_t* Tensor::mutable_data<uint16_t>();

Tensor Tensor::reshape(const Shape& shape) const {
  if (shape.numel() != numel())
    throw_invalid("cannot reshape tensor of shape " + shape_.str() + " to " + shape.str());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  if (ndim() == 0 || begin < 0 || end < begin || end > shape_[0])
    throw_invalid("rows [" + std::to_string(begin) + ", " + std::to_string(end) + ") out of range for shape " +
                  shape_.str());
  Tensor t = *this;
  int64_t row = numel() / std::max<int64_t>(shape_[0], 1);
  t.offset_ += static_cast<std::size_t>(begin * row) * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

namespace {
bool is_float_type(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16 || d == DType::kF64; }
// FP8 converts to every float type; only e4m3fn is made from floats (torch's
// e5m2 rounding from float is not implemented).
bool is_fp8(DType d) { return d == DType::kF8E4M3 || d == DType::kF8E5M2; }
}  // namespace

Tensor Tensor::to(DType dtype) const {
  if (!device().is_cpu()) throw_error(ErrorKind::kUnsupported, "dtype conversion of a " + device_name(device()) + " tensor");
  Tensor out = empty(shape_, dtype);
  std::size_t n = static_cast<std::size_t>(numel());
  if (dtype == dtype_) {
    if (n) std::memcpy(out.mutable_raw_data(), raw_data(), nbytes());
    return out;
  }
  if ((is_float_type(dtype_) || is_fp8(dtype_)) && (is_float_type(dtype) || dtype == DType::kF8E4M3)) {
    std::unique_ptr<float[]> tmp(new float[n ? n : 1]);
    convert_to_float(raw_data(), dtype_, n, tmp.get());
    void* dst = out.mutable_raw_data();
    for (std::size_t i = 0; i < n; ++i) {
      switch (dtype) {
        case DType::kF32: static_cast<float*>(dst)[i] = tmp[i]; break;
        case DType::kF64: static_cast<double*>(dst)[i] = tmp[i]; break;
        case DType::kBF16: static_cast<uint16_t*>(dst)[i] = float_to_bf16(tmp[i]); break;
        case DType::kF8E4M3: static_cast<uint8_t*>(dst)[i] = float_to_fp8_e4m3fn(tmp[i]); break;
        default: static_cast<uint16_t*>(dst)[i] = float_to_f16(tmp[i]); break;
      }
    }
    return out;
  }
  if ((dtype_ == DType::kI32 || dtype_ == DType::kI64) && (dtype == DType::kI32 || dtype == DType::kI64)) {
    for (std::size_t i = 0; i < n; ++i) {
      int64_t v = dtype_ == DType::kI32 ? static_cast<const int32_t*>(raw_data())[i]
                                         : static_cast<const int64_t*>(raw_data())[i];
      if (dtype == DType::kI32) static_cast<int32_t*>(out.mutable_raw_data())[i] = static_cast<int32_t>(v);
      else static_cast<int64_t*>(out.mutable_raw_data())[i] = v;
    }
    return out;
  }
  throw_error(ErrorKind::kUnsupported,
              std::string("conversion from ") + dtype_name(dtype_) + " to " + dtype_name(dtype));
}

// ---- Conversions ---------------------------------------------------------------

float bf16_to_float(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_bf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, 4);
  if (std::isnan(value)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep it a (quiet) NaN
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit.
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: value = mant * 2^-24
      float f = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -f : f;
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_f16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, 4);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero) in f16: value / 2^-24 rounded to an integer, ties to even.
    float mag;
    std::memcpy(&mag, &abs, 4);
    float scaled = mag * 16777216.0f;  // exact: power of two
    float r = std::nearbyint(scaled);  // default rounding mode is nearest-even
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(r));
  }
  uint32_t exp = (abs >> 23) - 112u;
  uint32_t mant = abs & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: still correct
  return static_cast<uint16_t>(sign | h);
}

float round_to_dtype(float value, DType dtype) {
  switch (dtype) {
    case DType::kBF16: return bf16_to_float(float_to_bf16(value));
    case DType::kF16: return f16_to_float(float_to_f16(value));
    default: return value;
  }
}

void round_to_dtype(std::span<float> values, DType dtype) {
  if (dtype != DType::kBF16 && dtype != DType::kF16) return;
  for (float& v : values) v = round_to_dtype(v, dtype);
}

void convert_to_float(const void* src, DType dtype, std::size_t count, float* dst) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, count * 4);
      return;
    case DType::kF64:
      for (std::size_t i = 0; i < count; ++i) {
        double d;
        std::memcpy(&d, bytes + 8 * i, 8);
        dst[i] = static_cast<float>(d);
      }
      return;
    case DType::kBF16:
    case DType::kF16:
      for (std::size_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        dst[i] = dtype == DType::kBF16 ? bf16_to_float(h) : f16_to_float(h);
      }
      return;
    case DType::kF8E4M3:
      for (std::size_t i = 0; i < count; ++i) dst[i] = fp8_e4m3fn_to_float(bytes[i]);
      return;
    case DType::kF8E5M2:
      for (std::size_t i = 0; i < count; ++i) dst[i] = f16_to_float(static_cast<uint16_t>(bytes[i] << 8));  // a half's top byte
      return;
    default:
      throw_error(ErrorKind::kUnsupported, std::string("cannot convert ") + dtype_name(dtype) + " to float");
  }
}

}  // namespace hipformers
