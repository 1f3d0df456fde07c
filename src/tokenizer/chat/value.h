// Runtime values of the chat-template interpreter: a small model of the Python
// objects jinja2 manipulates (None, bool, int, float, str, list/tuple, dict,
// jinja2's Undefined and Namespace, and callables), with Python's truthiness,
// equality, ordering, str() and repr() rules.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hipformers/core/json.h"

namespace hipformers::chat {

enum class Kind : std::uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // also tuples (Value::tuple)
  kDict,
  kNamespace,  // jinja2 namespace() and the read-only `loop` object
  kCallable,
};

struct Value;
struct ListData;
struct DictData;
struct NamespaceData;
struct Callable;
class Interpreter;

struct Value {
  Kind kind = Kind::kUndefined;
  bool tuple = false;      // kList printed/compared as a tuple
  bool b = false;
  std::int64_t i = 0;
  double f = 0.0;
  std::string s;  // kString payload; for kUndefined the error hint
  std::shared_ptr<ListData> list;
  std::shared_ptr<DictData> dict;
  std::shared_ptr<NamespaceData> ns;
  std::shared_ptr<Callable> fn;

  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(std::int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value make_list(std::vector<Value> items = {}, bool is_tuple = false);
  static Value make_dict();
  static Value make_namespace(std::string type_name, bool read_only);
  static Value callable(std::string name, std::function<Value(Interpreter&, struct CallArgs&)> fn);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  double as_double() const { return kind == Kind::kFloat ? f : kind == Kind::kBool ? (b ? 1.0 : 0.0) : double(i); }
};

struct ListData {
  std::vector<Value> items;
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value value);
};

struct NamespaceData {
  DictData attrs;
  std::string type_name;  // "Namespace" or "LoopContext"
  bool read_only = false;
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

// Limits shared by the engine (the fuzzer relies on them).
inline constexpr std::size_t kMaxStringBytes = 64u << 20;  // any string, incl. the output
inline constexpr std::size_t kMaxListItems = 1u << 20;
inline constexpr int kMaxDepth = 200;  // nesting of values when printing/comparing

// Python semantics. Functions that can fail throw hipformers::Error with a
// Python-like message (no template location; the interpreter adds it).
bool truthy(const Value& v);
std::string type_name(const Value& v);
std::string py_str(const Value& v);
std::string py_repr(const Value& v);
std::string float_repr(double d);
bool py_equal(const Value& a, const Value& b, int depth = 0);
// <0, 0, >0; throws TypeError-like Error when the types are not orderable.
int py_compare(const Value& a, const Value& b, const char* op, int depth = 0);
bool hashable(const Value& v);

Value from_json(const OrderedJson& j, int depth = 0);

// Error thrown for operations on an Undefined (jinja2's UndefinedError).
[[noreturn]] void undefined_error(const Value& v);

}  // namespace hipformers::chat
