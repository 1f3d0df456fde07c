// safetensors: zero-copy reading (mmap) and atomic writing.
//
// Format: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
// (an object: optional "__metadata__": {string: string}, and for every tensor
// name {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}), then
// the tensor data. Offsets are relative to the start of the data section.
//
// Reading validates exactly as strictly as Hugging Face `safetensors` does (plus
// rejecting duplicate JSON keys and unknown per-tensor keys); every failure is a
// hipformers::Error naming the file and, where there is one, the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "hipformers/core/dtype.h"

namespace hipformers {

// A tensor inside a safetensors buffer. `data` points into the file's mapping
// (or the caller's buffer for SafetensorsFile::parse) and stays valid as long as
// the SafetensorsFile (or a copy of it) lives. It is NOT necessarily aligned to
// the element size (files written by HF/us are 8-byte aligned, others may not
// be): memcpy, or check alignment, before reinterpreting.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // [] for a scalar
  const std::byte* data = nullptr;
  std::size_t nbytes = 0;

  // Product of the shape (1 for a scalar, 0 if any dimension is 0).
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`. Error(kNotFound) if it does not exist,
  // Error(kInvalidInput) if it is not a valid safetensors file.
  static SafetensorsFile open(const std::filesystem::path& path);

  // Validates an in-memory safetensors image. The views point into `bytes`, which
  // the caller must keep alive. `name` is used in error messages.
  static SafetensorsFile parse(std::span<const std::byte> bytes, std::string name);

  // Throws Error(kNotFound) "<file>: no tensor named '<name>'" if absent.
  const TensorView& tensor(const std::string& name) const;
  // nullptr if absent.
  const TensorView* find(const std::string& name) const;
  // All tensors, in file order (by data offset, then name).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The path given to open(), or the name given to parse().
  const std::filesystem::path& path() const { return path_; }
  // Total bytes of tensor data (the data section).
  std::size_t data_bytes() const { return data_bytes_; }

 private:
  SafetensorsFile() = default;

  std::filesystem::path path_;
  std::shared_ptr<const void> keep_alive_;  // the MappedFile, or null for parse()
  std::vector<TensorView> tensors_;
  std::unordered_map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
  std::size_t data_bytes_ = 0;
};

// One tensor for save_safetensors(); `data` must hold exactly
// numel(shape) * dtype_size(dtype) bytes, in row-major order.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::size_t nbytes = 0;
};

// Writes a standard safetensors file that Hugging Face `safetensors` reads.
// Tensors are laid out largest element size first (in HF's dtype order, I64 >
// F64 > F32 > I32 > BF16 > F16 > I16 > F8 > I8 > U8 > BOOL), then by name, so
// every tensor is aligned to its element size and the bytes match what HF's
// writer produces; the header is padded with spaces to a multiple of 8. The file is written to a temporary beside `path`,
// flushed and renamed into place, so an existing file is never left truncated.
// Throws Error(kInvalidInput) naming the tensor for a size mismatch, a negative
// dimension, a duplicate or reserved name, or invalid UTF-8 in a name/metadata.
void save_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace hipformers
