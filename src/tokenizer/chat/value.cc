#include "value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "hipformers/core/error.h"
#include "hipformers/core/utf8.h"

namespace hipformers::chat {

Value Value::undefined(std::string hint) {
  Value v;
  v.kind = Kind::kUndefined;
  v.s = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::integer(std::int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::move(x);
  return v;
}
Value Value::make_list(std::vector<Value> items, bool is_tuple) {
  if (items.size() > kMaxListItems) throw_invalid("list too large (more than " + std::to_string(kMaxListItems) + " items)");
  Value v;
  v.kind = Kind::kList;
  v.tuple = is_tuple;
  v.list = std::make_shared<ListData>();
  v.list->items = std::move(items);
  return v;
}
Value Value::make_dict() {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<DictData>();
  return v;
}
Value Value::make_namespace(std::string type_name, bool read_only) {
  Value v;
  v.kind = Kind::kNamespace;
  v.ns = std::make_shared<NamespaceData>();
  v.ns->type_name = std::move(type_name);
  v.ns->read_only = read_only;
  return v;
}
Value Value::callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  Value v;
  v.kind = Kind::kCallable;
  v.fn = std::make_shared<Callable>();
  v.fn->name = std::move(name);
  v.fn->fn = std::move(fn);
  return v;
}

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (py_equal(k, key)) return &v;
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.kind == Kind::kString && k.s == key) return &v;
  return nullptr;
}

void DictData::set(const Value& key, Value value) {
  for (auto& [k, v] : items) {
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  if (items.size() >= kMaxListItems) throw_invalid("dict too large");
  items.emplace_back(key, std::move(value));
}

[[noreturn]] void undefined_error(const Value& v) {
  throw_invalid(v.s.empty() ? std::string("value is undefined") : v.s);
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return v.b;
    case Kind::kInt: return v.i != 0;
    case Kind::kFloat: return v.f != 0.0;
    case Kind::kString: return !v.s.empty();
    case Kind::kList: return !v.list->items.empty();
    case Kind::kDict: return !v.dict->items.empty();
    case Kind::kNamespace:
    case Kind::kCallable: return true;
  }
  return false;
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return v.tuple ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return v.ns->type_name;
    case Kind::kCallable: return "function";
  }
  return "object";
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci: [-]D[.DDDD]e[+-]XX
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  auto epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string intpart = digits.substr(0, std::min<std::size_t>(digits.size(), exp + 1));
      while (intpart.size() < std::size_t(exp + 1)) intpart.push_back('0');
      std::string frac = digits.size() > std::size_t(exp + 1) ? digits.substr(exp + 1) : "0";
      return out + intpart + "." + frac;
    }
    return out + "0." + std::string(-exp - 1, '0') + digits;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  out += ebuf;
  return out;
}

namespace {

bool printable(char32_t c) {
  if (c < 0x20 || c == 0x7f) return false;
  if (c < 0x7f) return true;
  if (c <= 0xa0 || c == 0xad) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61c || c == 0x6dd || c == 0x70f || c == 0x1680 || c == 0x180e) return false;
  if ((c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) || (c >= 0x205f && c <= 0x2064) ||
      (c >= 0x2066 && c <= 0x206f) || c == 0x3000)
    return false;
  if ((c >= 0xd800 && c <= 0xf8ff) || c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb)) return false;
  if (c >= 0xe0000) return false;
  return true;
}

void repr_string(std::string& out, const std::string& s) {
  char quote = '\'';
  if (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) quote = '"';
  out.push_back(quote);
  std::size_t pos = 0;
  while (pos < s.size()) {
    char32_t c = utf8::decode(s, pos);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!printable(c)) {
      char buf[16];
      if (c < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      else if (c < 0x10000)
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", unsigned(c));
      out += buf;
    } else {
      utf8::append(out, c);
    }
  }
  out.push_back(quote);
}

void check_size(const std::string& out) {
  if (out.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
}

void repr_into(std::string& out, const Value& v, int depth, bool top_str);

void repr_into(std::string& out, const Value& v, int depth, bool top_str) {
  if (depth > kMaxDepth) throw_invalid("maximum recursion depth exceeded while printing a value");
  check_size(out);
  switch (v.kind) {
    case Kind::kUndefined:
      if (!top_str) out += "Undefined";
      return;
    case Kind::kNone: out += "None"; return;
    case Kind::kBool: out += v.b ? "True" : "False"; return;
    case Kind::kInt: out += std::to_string(v.i); return;
    case Kind::kFloat: out += float_repr(v.f); return;
    case Kind::kString:
      if (top_str)
        out += v.s;
      else
        repr_string(out, v.s);
      return;
    case Kind::kList: {
      out.push_back(v.tuple ? '(' : '[');
      bool first = true;
      for (const auto& item : v.list->items) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, item, depth + 1, false);
        check_size(out);
      }
      if (v.tuple && v.list->items.size() == 1) out.push_back(',');
      out.push_back(v.tuple ? ')' : ']');
      return;
    }
    case Kind::kDict: {
      out.push_back('{');
      bool first = true;
      for (const auto& [k, item] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, k, depth + 1, false);
        out += ": ";
        repr_into(out, item, depth + 1, false);
        check_size(out);
      }
      out.push_back('}');
      return;
    }
    case Kind::kNamespace: {
      if (v.ns->read_only) {
        out += "<" + v.ns->type_name + ">";
        return;
      }
      out += "<Namespace {";
      bool first = true;
      for (const auto& [k, item] : v.ns->attrs.items) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, k, depth + 1, false);
        out += ": ";
        repr_into(out, item, depth + 1, false);
      }
      out += "}>";
      return;
    }
    case Kind::kCallable: out += "<function " + v.fn->name + ">"; return;
  }
}

}  // namespace

std::string py_str(const Value& v) {
  if (v.kind == Kind::kString) return v.s;
  std::string out;
  repr_into(out, v, 0, true);
  return out;
}

std::string py_repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0, false);
  return out;
}

bool py_equal(const Value& a, const Value& b, int depth) {
  if (depth > kMaxDepth) throw_invalid("maximum recursion depth exceeded in comparison");
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::kFloat || b.kind == Kind::kFloat) return a.as_double() == b.as_double();
    std::int64_t x = a.kind == Kind::kBool ? a.b : a.i;
    std::int64_t y = b.kind == Kind::kBool ? b.b : b.i;
    return x == y;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.s == b.s;
    case Kind::kList: {
      if (a.tuple != b.tuple) return false;
      if (a.list == b.list) return true;
      if (a.list->items.size() != b.list->items.size()) return false;
      for (std::size_t k = 0; k < a.list->items.size(); ++k)
        if (!py_equal(a.list->items[k], b.list->items[k], depth + 1)) return false;
      return true;
    }
    case Kind::kDict: {
      if (a.dict == b.dict) return true;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* other = b.dict->find(k);
        if (!other || !py_equal(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Kind::kNamespace: return a.ns == b.ns;
    case Kind::kCallable: return a.fn == b.fn;
    default: return false;
  }
}

int py_compare(const Value& a, const Value& b, const char* op, int depth) {
  if (depth > kMaxDepth) throw_invalid("maximum recursion depth exceeded in comparison");
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::kFloat || b.kind == Kind::kFloat) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    std::int64_t x = a.kind == Kind::kBool ? a.b : a.i;
    std::int64_t y = b.kind == Kind::kBool ? b.b : b.i;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind == Kind::kString && b.kind == Kind::kString) {
    int c = a.s.compare(b.s);
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.kind == Kind::kList && b.kind == Kind::kList && a.tuple == b.tuple) {
    const auto& x = a.list->items;
    const auto& y = b.list->items;
    for (std::size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (py_equal(x[k], y[k], depth + 1)) continue;
      return py_compare(x[k], y[k], op, depth + 1);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  throw_invalid(std::string("'") + op + "' not supported between instances of '" + type_name(a) + "' and '" +
                type_name(b) + "'");
}

bool hashable(const Value& v) {
  switch (v.kind) {
    case Kind::kList:
      if (!v.tuple) return false;
      for (const auto& item : v.list->items)
        if (!hashable(item)) return false;
      return true;
    case Kind::kDict: return false;
    default: return true;
  }
}

Value from_json(const OrderedJson& j, int depth) {
  if (depth > kMaxDepth) throw_invalid("chat template input nested too deeply");
  switch (j.type()) {
    case OrderedJson::value_t::null: return Value::none();
    case OrderedJson::value_t::boolean: return Value::boolean(j.get<bool>());
    case OrderedJson::value_t::number_integer: return Value::integer(j.get<std::int64_t>());
    case OrderedJson::value_t::number_unsigned: {
      auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value::number(double(u));
      return Value::integer(static_cast<std::int64_t>(u));
    }
    case OrderedJson::value_t::number_float: return Value::number(j.get<double>());
    case OrderedJson::value_t::string: {
      const auto& str = j.get_ref<const std::string&>();
      if (!utf8::is_valid(str)) throw_invalid("chat template input contains a string that is not valid UTF-8");
      return Value::string(str);
    }
    case OrderedJson::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, depth + 1));
      return Value::make_list(std::move(items));
    }
    case OrderedJson::value_t::object: {
      Value d = Value::make_dict();
      d.dict->items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!utf8::is_valid(it.key())) throw_invalid("chat template input contains a key that is not valid UTF-8");
        d.dict->items.emplace_back(Value::string(it.key()), from_json(it.value(), depth + 1));
      }
      return d;
    }
    default: return Value::none();
  }
}

}  // namespace hipformers::chat
