#include "hipformers/core/dtype.h"

#include <array>

namespace hipformers {
namespace {

struct DTypeInfo {
  DType dtype;
  std::size_t size;
  const char* name;
  const char* torch_name;
};

constexpr std::array<DTypeInfo, 12> kDTypes = {{
    {DType::kF64, 8, "F64", "float64"},
    {DType::kF32, 4, "F32", "float32"},
    {DType::kF16, 2, "F16", "float16"},
    {DType::kBF16, 2, "BF16", "bfloat16"},
    {DType::kF8E4M3, 1, "F8_E4M3", "float8_e4m3fn"},
    {DType::kF8E5M2, 1, "F8_E5M2", "float8_e5m2"},
    {DType::kI64, 8, "I64", "int64"},
    {DType::kI32, 4, "I32", "int32"},
    {DType::kI16, 2, "I16", "int16"},
    {DType::kI8, 1, "I8", "int8"},
    {DType::kU8, 1, "U8", "uint8"},
    {DType::kBool, 1, "BOOL", "bool"},
}};

const DTypeInfo& info(DType dtype) { return kDTypes[static_cast<std::size_t>(dtype)]; }

}  // namespace

std::size_t dtype_size(DType dtype) { return info(dtype).size; }
const char* dtype_name(DType dtype) { return info(dtype).name; }
const char* dtype_torch_name(DType dtype) { return info(dtype).torch_name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return d.dtype;
  return std::nullopt;
}

std::optional<DType> parse_torch_dtype(std::string_view name) {
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  for (const auto& d : kDTypes)
    if (name == d.torch_name) return d.dtype;
  if (name == "fp32" || name == "f32" || name == "float") return DType::kF32;
  if (name == "bf16") return DType::kBF16;
  if (name == "fp16" || name == "f16" || name == "half") return DType::kF16;
  if (name == "fp64" || name == "double") return DType::kF64;
  return std::nullopt;
}

}  // namespace hipformers
