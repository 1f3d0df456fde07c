// Python operators on interpreter values: arithmetic, concatenation,
// membership, iteration and slicing.
#pragma once

#include <string>
#include <vector>

#include "value.h"

namespace hipformers::chat {

Value binary_op(const std::string& op, const Value& a, const Value& b);
Value unary_op(const std::string& op, const Value& a);
bool contains(const Value& container, const Value& item);
// Python iter(): list/tuple items, dict keys, str code points; Undefined is empty.
std::vector<Value> iterate(const Value& v);
// len(); throws for values without a length.
std::int64_t length(const Value& v);
// v[start:stop:step] for str, list and tuple (null arguments are Undefined).
Value slice(const Value& v, const Value& start, const Value& stop, const Value& step);
// "%"-formatting of a string (printf style, as Python's str % args).
std::string percent_format(const std::string& fmt, const Value& args);
// Python int() conversion of an index-like value; throws if not an int.
std::int64_t as_index(const Value& v, const char* what);

}  // namespace hipformers::chat
