#include "hipformers/core/json.h"

#include "hipformers/core/error.h"
#include "hipformers/core/file.h"

namespace hipformers {
namespace {

template <typename J>
J parse_as(std::string_view text, const std::string& what) {
  try {
    return J::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // parse_error for syntax, out_of_range for a number that overflows a
    // double (found by fuzzing). The message starts with a tag like
    // "[json.exception.parse_error.101] "; drop it.
    std::string msg = e.what();
    if (auto p = msg.find("] "); p != std::string::npos) msg = msg.substr(p + 2);
    throw_invalid(what + ": invalid JSON: " + msg);
  }
}

}  // namespace

Json parse_json(std::string_view text, const std::string& what) { return parse_as<Json>(text, what); }

OrderedJson parse_ordered_json(std::string_view text, const std::string& what) {
  return parse_as<OrderedJson>(text, what);
}

Json read_json_file(const std::filesystem::path& path) { return parse_json(read_file(path), path.string()); }

OrderedJson read_ordered_json_file(const std::filesystem::path& path) {
  return parse_ordered_json(read_file(path), path.string());
}

}  // namespace hipformers
