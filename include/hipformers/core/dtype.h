// Element types, named as safetensors names them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace hipformers {

enum class DType {
  kF64,
  kF32,
  kF16,
  kBF16,
  kF8E4M3,  // "F8_E4M3": OCP e4m3fn (NVIDIA, gfx950); ROCm gfx942 uses the fnuz variant
  kF8E5M2,  // "F8_E5M2"
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,
};

// Bytes per element.
std::size_t dtype_size(DType dtype);
// The safetensors spelling: "F32", "BF16", "F8_E4M3", "BOOL", ...
const char* dtype_name(DType dtype);
// Parses the safetensors spelling; nullopt if unknown.
std::optional<DType> parse_dtype(std::string_view name);
// The Hugging Face `torch_dtype` spelling: "float32", "bfloat16", "float8_e4m3fn", ...
const char* dtype_torch_name(DType dtype);
// Parses "float32"/"fp32"/"f32", "bfloat16"/"bf16", "float16"/"fp16"/"half", ...
std::optional<DType> parse_torch_dtype(std::string_view name);

}  // namespace hipformers
