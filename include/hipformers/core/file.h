// Whole-file reads and read-only memory maps with errors that name the path.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

namespace hipformers {

// Reads a whole file into memory. Throws Error(kNotFound) if it does not exist,
// Error(kRuntime) if it cannot be read.
std::string read_file(const std::filesystem::path& path);

// Writes `data` to `path` atomically: a temporary file beside it is written,
// flushed and renamed over the target, so a crash never leaves a half-written
// file where the user's data was.
void write_file_atomic(const std::filesystem::path& path, const void* data, std::size_t size);

// A read-only, private memory map of a whole file. Zero-length files map to an
// empty view. Not copyable; share it through std::shared_ptr.
class MappedFile {
 public:
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile() = default;
  std::filesystem::path path_;
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace hipformers
