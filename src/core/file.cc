#include "hipformers/core/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hipformers/core/error.h"

namespace hipformers {
namespace {

[[noreturn]] void throw_os_error(const std::filesystem::path& path, const char* what) {
  int err = errno;
  ErrorKind kind = (err == ENOENT || err == ENOTDIR) ? ErrorKind::kNotFound : ErrorKind::kRuntime;
  if (err == ENOMEM) kind = ErrorKind::kOutOfMemory;
  throw_error(kind, path.string() + ": " + what + ": " + std::strerror(err));
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

int open_regular_file(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_os_error(path, "cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw_os_error(path, "cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_error(ErrorKind::kInvalidInput, path.string() + ": not a regular file");
  }
  return fd;
}

}  // namespace

std::string read_file(const std::filesystem::path& path) {
  FileDescriptor fd(open_regular_file(path));
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_os_error(path, "cannot read");
    }
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

void write_file_atomic(const std::filesystem::path& path, const void* data, std::size_t size) {
  std::filesystem::path tmp = path;
  tmp += ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_os_error(tmp, "cannot create");
  const char* p = static_cast<const char*>(data);
  std::size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      errno = err;
      throw_os_error(path, "cannot write");
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    throw_os_error(path, "cannot flush");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    throw_os_error(path, "cannot rename temporary file into place");
  }
}

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  FileDescriptor fd(open_regular_file(path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_os_error(path, "cannot stat");
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<std::size_t>(st.st_size);
  if (file->size_ > 0) {
    void* addr = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (addr == MAP_FAILED) throw_os_error(path, "cannot mmap");
    file->data_ = static_cast<const unsigned char*>(addr);
  }
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
}

}  // namespace hipformers
