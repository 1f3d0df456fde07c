// Errors that reach the user. Every failure caused by the user's input or
// environment (a missing file, corrupt JSON, a truncated tensor, invalid UTF-8,
// an out-of-range id, out of memory) is thrown as hipformers::Error with a
// message that names the offending file/tensor/variable. The CLI turns it into
// one line on stderr and exit code 2 (see tools/hipformers/main.cc).
#pragma once

#include <stdexcept>
#include <string>

namespace hipformers {

enum class ErrorKind {
  kInvalidInput,  // malformed file, bad argument, invalid UTF-8, id out of range
  kNotFound,      // missing file, tensor, key
  kUnsupported,   // architecture, dtype, syntax or backend we do not handle
  kOutOfMemory,   // host or device allocation failed
  kRuntime,       // a driver / OS call failed
};

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] void throw_error(ErrorKind kind, const std::string& message);

// Convenience for the most common kind.
[[noreturn]] inline void throw_invalid(const std::string& message) {
  throw_error(ErrorKind::kInvalidInput, message);
}

}  // namespace hipformers
