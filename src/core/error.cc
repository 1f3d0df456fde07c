#include "hipformers/core/error.h"

namespace hipformers {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput: return "invalid input";
    case ErrorKind::kNotFound: return "not found";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kOutOfMemory: return "out of memory";
    case ErrorKind::kRuntime: return "runtime error";
  }
  return "error";
}

void throw_error(ErrorKind kind, const std::string& message) { throw Error(kind, message); }

}  // namespace hipformers
