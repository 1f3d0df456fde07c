// Typed access to tokenizer.json fields. Every failure names the file and the
// JSON path ("tokenizer.json: model.merges[12]: expected two tokens") so a user
// with a broken file knows exactly what to fix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hipformers/core/error.h"
#include "hipformers/core/json.h"

namespace hipformers::tok {

// Ids index dense tables; real vocabularies stay far below this, and the cap
// keeps a corrupt file from asking for gigabytes.
constexpr std::int64_t kMaxTokenId = (1 << 24) - 1;

// Limits nesting of Sequence components so hostile files cannot exhaust the
// stack; construct one at each recursive factory call.
class NestingGuard {
 public:
  explicit NestingGuard(const class JsonField& where);
  ~NestingGuard() { --depth(); }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;

 private:
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
};

// A JSON value together with where it came from.
class JsonField {
 public:
  JsonField(const Json& value, const std::string& source, std::string path)
      : value_(&value), source_(&source), path_(std::move(path)) {}

  const Json& json() const { return *value_; }
  const std::string& path() const { return path_; }
  const std::string& source() const { return *source_; }

  [[noreturn]] void fail(const std::string& message) const {
    throw_invalid(*source_ + ": " + (path_.empty() ? std::string("<root>") : path_) + ": " + message);
  }

  bool is_null() const { return value_->is_null(); }
  bool has(const char* key) const { return value_->is_object() && value_->contains(key) && !(*value_)[key].is_null(); }

  // Member access: `at` requires the key (non-null), `get` returns nullopt when absent or null.
  JsonField at(const char* key) const;
  std::optional<JsonField> get(const char* key) const;
  JsonField index(std::size_t i) const;

  const Json::object_t& object() const;
  const Json::array_t& array() const;
  std::string str() const;
  bool boolean() const;
  std::int64_t integer() const;
  double number() const;

  // Optional members with defaults (absent or null -> default).
  std::string str_or(const char* key, const std::string& def) const;
  std::optional<std::string> opt_str(const char* key) const;
  bool bool_or(const char* key, bool def) const;
  std::int64_t int_or(const char* key, std::int64_t def) const;

  std::string type_name() const;  // the "type" member, required

 private:
  const Json* value_;
  const std::string* source_;
  std::string path_;
};

inline NestingGuard::NestingGuard(const JsonField& where) {
  if (++depth() > 64) {
    --depth();
    where.fail("components nested more than 64 deep");
  }
}

}  // namespace hipformers::tok
