#include "operators.h"

#include <cmath>
#include <cstdio>

#include "hipformers/core/error.h"
#include "pystring.h"

namespace hipformers::chat {

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  throw_invalid("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

bool is_int_like(const Value& v) { return v.kind == Kind::kInt || v.kind == Kind::kBool; }
std::int64_t int_of(const Value& v) { return v.kind == Kind::kBool ? (v.b ? 1 : 0) : v.i; }

[[noreturn]] void overflow() { throw_invalid("integer overflow (values beyond 64 bits are not supported)"); }

Value repeat(const Value& seq, std::int64_t n) {
  if (n < 0) n = 0;
  if (seq.kind == Kind::kString) {
    if (seq.s.size() && static_cast<std::uint64_t>(n) > kMaxStringBytes / seq.s.size())
      throw_invalid("string too large (over 64 MiB)");
    std::string out;
    out.reserve(seq.s.size() * static_cast<std::size_t>(n));
    for (std::int64_t k = 0; k < n; ++k) out += seq.s;
    return Value::string(std::move(out));
  }
  const auto& items = seq.list->items;
  if (items.size() && static_cast<std::uint64_t>(n) > kMaxListItems / items.size())
    throw_invalid("list too large (more than " + std::to_string(kMaxListItems) + " items)");
  std::vector<Value> out;
  out.reserve(items.size() * static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) out.insert(out.end(), items.begin(), items.end());
  return Value::make_list(std::move(out), seq.tuple);
}

double float_floordiv(double a, double b, double* mod_out) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, b);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, a / b);
  }
  if (mod_out) *mod_out = mod;
  return floordiv;
}

}  // namespace

std::int64_t as_index(const Value& v, const char* what) {
  if (is_int_like(v)) return int_of(v);
  if (v.is_undefined()) undefined_error(v);
  throw_invalid(std::string(what) + " must be integers, not " + type_name(v));
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = py_str(a);
    s += py_str(b);
    if (s.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
    return Value::string(std::move(s));
  }
  const bool nums = a.is_number() && b.is_number();
  const bool ints = is_int_like(a) && is_int_like(b);
  if (op == "+") {
    if (ints) {
      std::int64_t r;
      if (__builtin_add_overflow(int_of(a), int_of(b), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() + b.as_double());
    if (a.kind == Kind::kString && b.kind == Kind::kString) {
      if (a.s.size() + b.s.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
      return Value::string(a.s + b.s);
    }
    if (a.kind == Kind::kList && b.kind == Kind::kList && a.tuple == b.tuple) {
      std::vector<Value> items = a.list->items;
      items.insert(items.end(), b.list->items.begin(), b.list->items.end());
      return Value::make_list(std::move(items), a.tuple);
    }
    if (a.kind == Kind::kString && !b.is_undefined())
      throw_invalid("can only concatenate str (not \"" + type_name(b) + "\") to str");
    if (a.kind == Kind::kList && !a.tuple && !b.is_undefined())
      throw_invalid("can only concatenate list (not \"" + type_name(b) + "\") to list");
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) {
      std::int64_t r;
      if (__builtin_sub_overflow(int_of(a), int_of(b), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() - b.as_double());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) {
      std::int64_t r;
      if (__builtin_mul_overflow(int_of(a), int_of(b), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() * b.as_double());
    if ((a.kind == Kind::kString || a.kind == Kind::kList) && is_int_like(b)) return repeat(a, int_of(b));
    if ((b.kind == Kind::kString || b.kind == Kind::kList) && is_int_like(a)) return repeat(b, int_of(a));
    if ((a.kind == Kind::kString || a.kind == Kind::kList) && !b.is_undefined())
      throw_invalid("can't multiply sequence by non-int of type '" + type_name(b) + "'");
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!nums) unsupported("/", a, b);
    if (b.as_double() == 0.0) throw_invalid("division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.kind == Kind::kString) return Value::string(percent_format(a.s, b));
    if (!nums) unsupported(op, a, b);
    if (ints) {
      std::int64_t x = int_of(a), y = int_of(b);
      if (y == 0) throw_invalid(op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
      if (x == INT64_MIN && y == -1) {
        if (op == "//") overflow();
        return Value::integer(0);
      }
      std::int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        q -= 1;
        r += y;
      }
      return Value::integer(op == "//" ? q : r);
    }
    if (b.as_double() == 0.0) throw_invalid(op == "//" ? "float floor division by zero" : "float modulo");
    double mod = 0;
    double q = float_floordiv(a.as_double(), b.as_double(), &mod);
    return Value::number(op == "//" ? q : mod);
  }
  if (op == "**") {
    if (!nums) unsupported("** or pow()", a, b);
    if (ints && int_of(b) >= 0) {
      std::int64_t base = int_of(a), e = int_of(b), r = 1;
      while (e > 0) {
        if (e & 1)
          if (__builtin_mul_overflow(r, base, &r)) overflow();
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
      }
      return Value::integer(r);
    }
    double x = a.as_double(), y = b.as_double();
    if (x == 0.0 && y < 0) throw_invalid("0.0 cannot be raised to a negative power");
    double r = std::pow(x, y);
    if (std::isnan(r) && !std::isnan(x) && !std::isnan(y)) throw_invalid("complex results are not supported");
    if (std::isinf(r) && !std::isinf(x) && !std::isinf(y)) throw_invalid("numerical result out of range");
    return Value::number(r);
  }
  throw_invalid("unknown operator '" + op + "'");
}

Value unary_op(const std::string& op, const Value& a) {
  if (op == "not") return Value::boolean(!truthy(a));
  if (a.kind == Kind::kBool || a.kind == Kind::kInt) {
    std::int64_t v = int_of(a);
    if (op == "+") return Value::integer(v);
    if (v == INT64_MIN) overflow();
    return Value::integer(-v);
  }
  if (a.kind == Kind::kFloat) return Value::number(op == "-" ? -a.f : a.f);
  if (a.is_undefined()) undefined_error(a);
  throw_invalid("bad operand type for unary " + op + ": '" + type_name(a) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::kUndefined: return false;
    case Kind::kString:
      if (item.kind != Kind::kString) {
        if (item.is_undefined()) undefined_error(item);
        throw_invalid("'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.s.find(item.s) != std::string::npos;
    case Kind::kList:
      for (const auto& v : container.list->items)
        if (py_equal(v, item)) return true;
      return false;
    case Kind::kDict:
      if (!hashable(item)) throw_invalid("unhashable type: '" + type_name(item) + "'");
      return container.dict->find(item) != nullptr;
    default: throw_invalid("argument of type '" + type_name(container) + "' is not iterable");
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return {};
    case Kind::kList: return v.list->items;
    case Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict->items.size());
      for (const auto& kv : v.dict->items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::kString: {
      auto offs = cp_offsets(v.s);
      std::vector<Value> out;
      out.reserve(offs.size());
      for (std::size_t k = 0; k + 1 < offs.size(); ++k)
        out.push_back(Value::string(v.s.substr(offs[k], offs[k + 1] - offs[k])));
      return out;
    }
    default: throw_invalid("'" + type_name(v) + "' object is not iterable");
  }
}

std::int64_t length(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return static_cast<std::int64_t>(cp_count(v.s));
    case Kind::kList: return static_cast<std::int64_t>(v.list->items.size());
    case Kind::kDict: return static_cast<std::int64_t>(v.dict->items.size());
    default: throw_invalid("object of type '" + type_name(v) + "' has no len()");
  }
}

Value slice(const Value& v, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (v.is_undefined()) undefined_error(v);
  if (v.kind != Kind::kString && v.kind != Kind::kList)
    throw_invalid("'" + type_name(v) + "' object is not subscriptable");
  auto opt = [](const Value& x) { return x.is_undefined() || x.is_none(); };
  std::int64_t step = opt(step_v) ? 1 : as_index(step_v, "slice indices");
  if (step == 0) throw_invalid("slice step cannot be zero");
  std::vector<std::size_t> offs;
  std::int64_t n;
  if (v.kind == Kind::kString) {
    offs = cp_offsets(v.s);
    n = static_cast<std::int64_t>(offs.size()) - 1;
  } else {
    n = static_cast<std::int64_t>(v.list->items.size());
  }
  auto adjust = [&](const Value& x, bool is_start) -> std::int64_t {
    if (opt(x)) {
      if (step > 0) return is_start ? 0 : n;
      return is_start ? n - 1 : -1;
    }
    std::int64_t i = as_index(x, "slice indices");
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  std::int64_t start = adjust(start_v, true), stop = adjust(stop_v, false);
  std::vector<std::int64_t> idx;
  if (step > 0) {
    for (std::int64_t k = start; k < stop; k += step) {
      idx.push_back(k);
      if (k > INT64_MAX - step) break;
    }
  } else {
    for (std::int64_t k = start; k > stop; k += step) {
      idx.push_back(k);
      if (k < INT64_MIN - step) break;
    }
  }
  if (v.kind == Kind::kString) {
    std::string out;
    if (step == 1 && !idx.empty()) return Value::string(v.s.substr(offs[start], offs[stop] - offs[start]));
    for (auto k : idx) out.append(v.s, offs[k], offs[k + 1] - offs[k]);
    return Value::string(std::move(out));
  }
  std::vector<Value> items;
  items.reserve(idx.size());
  for (auto k : idx) items.push_back(v.list->items[static_cast<std::size_t>(k)]);
  return Value::make_list(std::move(items), v.tuple);
}

std::string percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> list;
  const Value* mapping = nullptr;
  if (args.kind == Kind::kList && args.tuple)
    list = args.list->items;
  else if (args.kind == Kind::kDict)
    mapping = &args;
  else
    list.push_back(args);
  std::size_t next = 0;
  std::string out;
  for (std::size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out.push_back(fmt[k]);
      continue;
    }
    if (++k >= fmt.size()) throw_invalid("incomplete format");
    const Value* arg = nullptr;
    if (fmt[k] == '(') {
      std::size_t close = fmt.find(')', k);
      if (close == std::string::npos || !mapping) throw_invalid("format requires a mapping");
      arg = mapping->dict->find(std::string_view(fmt).substr(k + 1, close - k - 1));
      if (!arg) throw_invalid("format key not found");
      k = close + 1;
      if (k >= fmt.size()) throw_invalid("incomplete format");
    }
    std::string spec = "%";
    while (k < fmt.size() && std::string_view("-+ #0123456789.").find(fmt[k]) != std::string_view::npos) {
      spec.push_back(fmt[k++]);
      if (spec.size() > 8) throw_invalid("format specifier too long");
    }
    if (k >= fmt.size()) throw_invalid("incomplete format");
    char conv = fmt[k];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (!arg) {
      if (mapping) arg = &args;
      else if (next < list.size()) arg = &list[next++];
      else throw_invalid("not enough arguments for format string");
    }
    char buf[512];
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        std::string s = conv == 's' ? py_str(*arg) : py_repr(*arg);
        if (spec == "%") {
          out += s;
        } else {
          spec += 's';
          std::snprintf(buf, sizeof buf, spec.c_str(), s.c_str());
          out += buf;
        }
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o': {
        if (!arg->is_number()) throw_invalid("%" + std::string(1, conv) + " format: a number is required, not " + type_name(*arg));
        long long v = arg->kind == Kind::kFloat ? static_cast<long long>(arg->f) : int_of(*arg);
        spec += "ll";
        spec.push_back(conv == 'i' ? 'd' : conv);
        std::snprintf(buf, sizeof buf, spec.c_str(), v);
        out += buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!arg->is_number()) throw_invalid("must be real number, not " + type_name(*arg));
        spec.push_back(conv);
        std::snprintf(buf, sizeof buf, spec.c_str(), arg->as_double());
        out += buf;
        break;
      }
      default: throw_invalid(std::string("unsupported format character '") + conv + "'");
    }
    if (out.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
  }
  if (!mapping && next < list.size()) throw_invalid("not all arguments converted during string formatting");
  return out;
}

}  // namespace hipformers::chat
