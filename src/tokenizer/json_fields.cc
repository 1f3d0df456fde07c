#include "json_fields.h"

#include <cmath>

namespace hipformers::tok {
namespace {

const char* kind_of(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

}  // namespace

JsonField JsonField::at(const char* key) const {
  if (!value_->is_object()) fail(std::string("expected an object, got ") + kind_of(*value_));
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) {
    throw_invalid(*source_ + ": " + (path_.empty() ? std::string("") : path_ + ".") + key + ": missing required field");
  }
  return JsonField(*it, *source_, path_.empty() ? std::string(key) : path_ + "." + key);
}

std::optional<JsonField> JsonField::get(const char* key) const {
  if (!value_->is_object()) fail(std::string("expected an object, got ") + kind_of(*value_));
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonField(*it, *source_, path_.empty() ? std::string(key) : path_ + "." + key);
}

JsonField JsonField::index(std::size_t i) const {
  const auto& a = array();
  return JsonField(a[i], *source_, path_ + "[" + std::to_string(i) + "]");
}

const Json::object_t& JsonField::object() const {
  if (!value_->is_object()) fail(std::string("expected an object, got ") + kind_of(*value_));
  return value_->get_ref<const Json::object_t&>();
}

const Json::array_t& JsonField::array() const {
  if (!value_->is_array()) fail(std::string("expected an array, got ") + kind_of(*value_));
  return value_->get_ref<const Json::array_t&>();
}

std::string JsonField::str() const {
  if (!value_->is_string()) fail(std::string("expected a string, got ") + kind_of(*value_));
  return value_->get<std::string>();
}

bool JsonField::boolean() const {
  if (!value_->is_boolean()) fail(std::string("expected a boolean, got ") + kind_of(*value_));
  return value_->get<bool>();
}

std::int64_t JsonField::integer() const {
  if (value_->is_number_integer()) return value_->get<std::int64_t>();
  if (value_->is_number_unsigned()) {
    auto u = value_->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) fail("integer out of range");
    return static_cast<std::int64_t>(u);
  }
  fail(std::string("expected an integer, got ") + kind_of(*value_));
}

double JsonField::number() const {
  if (!value_->is_number()) fail(std::string("expected a number, got ") + kind_of(*value_));
  return value_->get<double>();
}

std::string JsonField::str_or(const char* key, const std::string& def) const {
  auto f = get(key);
  return f ? f->str() : def;
}

std::optional<std::string> JsonField::opt_str(const char* key) const {
  auto f = get(key);
  if (!f) return std::nullopt;
  return f->str();
}

bool JsonField::bool_or(const char* key, bool def) const {
  auto f = get(key);
  return f ? f->boolean() : def;
}

std::int64_t JsonField::int_or(const char* key, std::int64_t def) const {
  auto f = get(key);
  return f ? f->integer() : def;
}

std::string JsonField::type_name() const { return at("type").str(); }

}  // namespace hipformers::tok
