// json.dumps() as Python's json module writes it (the `tojson` filter of
// Transformers' chat-template environment).
#pragma once

#include <string>

#include "value.h"

namespace hipformers::chat {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;  // per level, when has_indent
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};

std::string json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace hipformers::chat
