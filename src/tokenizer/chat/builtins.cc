#include "builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>

#include "hipformers/core/error.h"
#include "operators.h"
#include "pystring.h"
#include "python_json.h"

namespace hipformers::chat {

const Value* arg(const CallArgs& a, std::size_t pos, const char* name) {
  if (pos < a.pos.size()) return &a.pos[pos];
  for (const auto& [k, v] : a.kw)
    if (k == name) return &v;
  return nullptr;
}

namespace {

using Filter = Value (*)(Interpreter&, const Value&, CallArgs&);
using Test = bool (*)(Interpreter&, const Value&, CallArgs&);

// ---- argument helpers ------------------------------------------------------
// Filters receive their extra arguments starting at position 0 (the value is
// passed separately).
bool arg_bool(const CallArgs& a, std::size_t pos, const char* name, bool dflt) {
  const Value* v = arg(a, pos, name);
  return v ? truthy(*v) : dflt;
}
std::int64_t arg_int(const CallArgs& a, std::size_t pos, const char* name, std::int64_t dflt) {
  const Value* v = arg(a, pos, name);
  if (!v || v->is_none()) return dflt;
  if (v->kind == Kind::kFloat) return static_cast<std::int64_t>(v->f);
  return as_index(*v, name);
}
std::optional<std::string> arg_str(const CallArgs& a, std::size_t pos, const char* name) {
  const Value* v = arg(a, pos, name);
  if (!v || v->is_none()) return std::nullopt;
  if (v->kind != Kind::kString) {
    if (v->is_undefined()) undefined_error(*v);
    throw_invalid(std::string("argument '") + name + "' must be str, not " + type_name(*v));
  }
  return v->s;
}
const std::string& need_str(const Value& v, const char* what) {
  if (v.kind != Kind::kString) {
    if (v.is_undefined()) undefined_error(v);
    throw_invalid(std::string(what) + " expects a string, got " + type_name(v));
  }
  return v.s;
}

// Attribute path lookup as jinja2's make_attrgetter ("a.b", "0").
Value attr_path(Interpreter& in, const Value& item, const std::string& path) {
  Value cur = item;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits && part.size() < 18)
      cur = in.get_item(cur, Value::integer(std::stoll(part)));
    else
      cur = in.get_item(cur, Value::string(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.kind == Kind::kString) return Value::string(py_lower(v.s));
  return v;
}

// ---- filters ---------------------------------------------------------------
Value f_length(Interpreter&, const Value& v, CallArgs&) { return Value::integer(length(v)); }

Value f_tojson(Interpreter&, const Value& v, CallArgs& a) {
  JsonDumpOptions o;
  o.ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
  const Value* indent = arg(a, 1, "indent");
  if (indent && !indent->is_none()) {
    o.has_indent = true;
    if (indent->kind == Kind::kString) {
      o.indent = indent->s;
    } else {
      std::int64_t n = as_index(*indent, "indent");
      if (n > 1000) throw_invalid("indent too large");
      o.indent = std::string(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)), ' ');
    }
    o.item_separator = ",";
  }
  const Value* seps = arg(a, 2, "separators");
  if (seps && !seps->is_none()) {
    if (seps->kind != Kind::kList || seps->list->items.size() != 2 || !seps->list->items[0].is_string() ||
        !seps->list->items[1].is_string())
      throw_invalid("tojson separators must be a pair of strings");
    o.item_separator = seps->list->items[0].s;
    o.key_separator = seps->list->items[1].s;
  }
  o.sort_keys = arg_bool(a, 3, "sort_keys", false);
  return Value::string(json_dumps(v, o));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  return Value::string(py_strip(py_str(v), arg_str(a, 0, "chars"), true, true));
}
Value f_upper(Interpreter&, const Value& v, CallArgs&) { return Value::string(py_upper(py_str(v))); }
Value f_lower(Interpreter&, const Value& v, CallArgs&) { return Value::string(py_lower(py_str(v))); }
Value f_title(Interpreter&, const Value& v, CallArgs&) { return Value::string(jinja_title(py_str(v))); }
Value f_capitalize(Interpreter&, const Value& v, CallArgs&) { return Value::string(py_capitalize(py_str(v))); }

Value f_replace(Interpreter&, const Value& v, CallArgs& a) {
  const Value* old_v = arg(a, 0, "old");
  const Value* new_v = arg(a, 1, "new");
  if (!old_v || !new_v) throw_invalid("replace() needs 'old' and 'new'");
  std::int64_t count = arg_int(a, 2, "count", -1);
  return Value::string(py_replace(py_str(v), py_str(*old_v), py_str(*new_v), count));
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "d");
  std::string sep = d ? py_str(*d) : "";
  auto attribute = arg_str(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (const auto& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += py_str(attribute ? attr_path(in, item, *attribute) : item);
    if (out.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
    in.step();
  }
  return Value::string(std::move(out));
}

Value f_first(Interpreter&, const Value& v, CallArgs&) {
  auto items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}
Value f_last(Interpreter&, const Value& v, CallArgs&) {
  auto items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default_value");
  bool boolean = arg_bool(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) return d ? *d : Value::string("");
  return v;
}

Value f_string(Interpreter&, const Value& v, CallArgs&) { return Value::string(py_str(v)); }

std::optional<double> parse_py_float(std::string s) {
  s = py_strip(s, std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  std::string low = py_lower(s);
  std::string body = (low[0] == '+' || low[0] == '-') ? low.substr(1) : low;
  if (body == "inf" || body == "infinity" || body == "nan") {
    double r = body == "nan" ? NAN : INFINITY;
    return low[0] == '-' ? -r : r;
  }
  for (char c : body)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-'))
      return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  const Value* dv = arg(a, 0, "default");
  Value dflt = dv ? *dv : Value::integer(0);
  std::int64_t base = arg_int(a, 1, "base", 10);
  switch (v.kind) {
    case Kind::kInt: return v;
    case Kind::kBool: return Value::integer(v.b);
    case Kind::kFloat:
      if (!std::isfinite(v.f) || std::fabs(v.f) >= 9.2e18) return dflt;
      return Value::integer(static_cast<std::int64_t>(v.f));
    case Kind::kString: {
      std::string s = py_strip(v.s, std::nullopt, true, true);
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      if (!s.empty() && base >= 2 && base <= 36) {
        errno = 0;
        char* end = nullptr;
        long long r = std::strtoll(s.c_str(), &end, static_cast<int>(base));
        if (end == s.c_str() + s.size() && errno == 0 && std::isalnum(static_cast<unsigned char>(s.back())))
          return Value::integer(r);
      }
      auto d = parse_py_float(v.s);
      if (d && std::isfinite(*d) && std::fabs(*d) < 9.2e18) return Value::integer(static_cast<std::int64_t>(*d));
      return dflt;
    }
    default: return dflt;
  }
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  const Value* dv = arg(a, 0, "default");
  Value dflt = dv ? *dv : Value::number(0.0);
  if (v.is_number()) return Value::number(v.as_double());
  if (v.kind == Kind::kString) {
    auto d = parse_py_float(v.s);
    if (d) return Value::number(*d);
  }
  return dflt;
}

Value f_list(Interpreter&, const Value& v, CallArgs&) { return Value::make_list(iterate(v)); }

Value f_items(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::make_list();
  if (v.kind != Kind::kDict) throw_invalid("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict->items) out.push_back(Value::make_list({k, x}, true));
  return Value::make_list(std::move(out));
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  if (v.kind != Kind::kDict) {
    if (v.is_undefined()) undefined_error(v);
    throw_invalid("dictsort expects a mapping");
  }
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  auto by = arg_str(a, 1, "by").value_or("key");
  bool rev = arg_bool(a, 2, "reverse", false);
  if (by != "key" && by != "value") throw_invalid("You can only sort by either \"key\" or \"value\"");
  std::size_t pos = by == "key" ? 0 : 1;
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict->items) out.push_back(Value::make_list({k, x}, true));
  std::stable_sort(out.begin(), out.end(), [&](const Value& l, const Value& r) {
    int c = py_compare(sort_key(l.list->items[pos], cs), sort_key(r.list->items[pos], cs), "<");
    return rev ? c > 0 : c < 0;
  });
  return Value::make_list(std::move(out));
}

Value select_impl(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  std::vector<Value> out;
  std::size_t base = 0;
  std::string attribute;
  if (by_attr) {
    auto at = arg_str(a, 0, "attr");
    if (!at) throw_invalid("selectattr/rejectattr need an attribute name");
    attribute = *at;
    base = 1;
  }
  std::optional<std::string> test_name;
  if (a.pos.size() > base) test_name = need_str(a.pos[base], "select test name");
  CallArgs test_args;
  for (std::size_t k = base + 1; k < a.pos.size(); ++k) test_args.pos.push_back(a.pos[k]);
  for (const auto& item : iterate(v)) {
    in.step();
    Value x = by_attr ? attr_path(in, item, attribute) : item;
    bool ok;
    if (test_name) {
      CallArgs copy = test_args;
      ok = in.test(*test_name, x, copy);
    } else {
      ok = truthy(x);
    }
    if (ok == keep) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  auto attribute = arg_str(a, 99, "attribute");
  if (attribute) {
    const Value* dflt = arg(a, 99, "default");
    for (const auto& item : iterate(v)) {
      in.step();
      Value x = attr_path(in, item, *attribute);
      if (x.is_undefined() && dflt) x = *dflt;
      out.push_back(std::move(x));
    }
    return Value::make_list(std::move(out));
  }
  if (a.pos.empty()) throw_invalid("map requires a filter argument");
  std::string filter = need_str(a.pos[0], "map filter name");
  CallArgs fargs;
  fargs.pos.assign(a.pos.begin() + 1, a.pos.end());
  fargs.kw = a.kw;
  for (const auto& item : iterate(v)) {
    in.step();
    CallArgs copy = fargs;
    out.push_back(in.filter(filter, item, copy));
  }
  return Value::make_list(std::move(out));
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  auto attribute = arg_str(a, 1, "attribute");
  std::vector<Value> out, seen;
  for (const auto& item : iterate(v)) {
    in.step(1 + seen.size() / 64);
    Value key = sort_key(attribute ? attr_path(in, item, *attribute) : item, cs);
    bool dup = false;
    for (const auto& s : seen)
      if (py_equal(s, key)) {
        dup = true;
        break;
      }
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

Value f_reverse(Interpreter&, const Value& v, CallArgs&) {
  if (v.kind == Kind::kString) {
    auto items = iterate(v);
    std::string out;
    for (auto it = items.rbegin(); it != items.rend(); ++it) out += it->s;
    return Value::string(std::move(out));
  }
  auto items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::make_list(std::move(items));
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
  bool rev = arg_bool(a, 0, "reverse", false);
  bool cs = arg_bool(a, 1, "case_sensitive", false);
  auto attribute = arg_str(a, 2, "attribute");
  auto items = iterate(v);
  in.step(items.size());
  std::vector<Value> keys;
  for (const auto& item : items) keys.push_back(sort_key(attribute ? attr_path(in, item, *attribute) : item, cs));
  std::vector<std::size_t> order(items.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t l, std::size_t r) {
    int c = py_compare(keys[l], keys[r], "<");
    return rev ? c > 0 : c < 0;
  });
  std::vector<Value> out;
  for (auto k : order) out.push_back(items[k]);
  return Value::make_list(std::move(out));
}

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  auto attribute = arg_str(a, 0, "attribute");
  const Value* start = arg(a, 1, "start");
  Value total = start ? *start : Value::integer(0);
  for (const auto& item : iterate(v)) {
    in.step();
    total = binary_op("+", total, attribute ? attr_path(in, item, *attribute) : item);
  }
  return total;
}

Value minmax(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  auto attribute = arg_str(a, 1, "attribute");
  auto items = iterate(v);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  std::size_t best = 0;
  Value best_key = sort_key(attribute ? attr_path(in, items[0], *attribute) : items[0], cs);
  for (std::size_t k = 1; k < items.size(); ++k) {
    Value key = sort_key(attribute ? attr_path(in, items[k], *attribute) : items[k], cs);
    int c = py_compare(key, best_key, want_max ? ">" : "<");
    if (want_max ? c > 0 : c < 0) {
      best = k;
      best_key = key;
    }
  }
  return items[best];
}
Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return minmax(in, v, a, false); }
Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return minmax(in, v, a, true); }

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  std::int64_t precision = arg_int(a, 0, "precision", 0);
  auto method = arg_str(a, 1, "method").value_or("common");
  if (method != "common" && method != "ceil" && method != "floor")
    throw_invalid("method must be 'common', 'ceil' or 'floor'");
  if (!v.is_number()) {
    if (v.is_undefined()) undefined_error(v);
    throw_invalid("type " + type_name(v) + " doesn't define __round__ method");
  }
  if (method == "common") {
    if (v.kind != Kind::kFloat) return Value::integer(v.kind == Kind::kBool ? v.b : v.i);
    if (!std::isfinite(v.f) || precision > 300) return v;
    if (precision < -300) return Value::number(0.0 * v.f);
    char buf[512];
    if (precision >= 0) {
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), v.f);
      return Value::number(std::strtod(buf, nullptr));
    }
    double scale = std::pow(10.0, static_cast<double>(-precision));
    double scaled = v.f / scale;
    std::snprintf(buf, sizeof buf, "%.0f", scaled);
    return Value::number(std::strtod(buf, nullptr) * scale);
  }
  if (precision > 300 || precision < -300) throw_invalid("round precision out of range");
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  x = method == "ceil" ? std::ceil(x) : std::floor(x);
  return Value::number(x / scale);
}

Value f_abs(Interpreter&, const Value& v, CallArgs&) {
  if (v.kind == Kind::kFloat) return Value::number(std::fabs(v.f));
  if (v.kind == Kind::kInt || v.kind == Kind::kBool) {
    std::int64_t x = v.kind == Kind::kBool ? v.b : v.i;
    if (x == INT64_MIN) throw_invalid("integer overflow");
    return Value::integer(x < 0 ? -x : x);
  }
  if (v.is_undefined()) undefined_error(v);
  throw_invalid("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_indent(Interpreter&, const Value& v, CallArgs& a) {
  const Value* w = arg(a, 0, "width");
  std::string ind;
  if (w && w->kind == Kind::kString) {
    ind = w->s;
  } else {
    std::int64_t n = w ? as_index(*w, "width") : 4;
    if (n > 1000) throw_invalid("indent width too large");
    ind = std::string(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)), ' ');
  }
  bool first = arg_bool(a, 1, "first", false);
  bool blank = arg_bool(a, 2, "blank", false);
  std::string s = py_str(v) + "\n";
  auto lines = py_splitlines(s, false);
  std::string rv;
  if (blank) {
    for (std::size_t k = 0; k < lines.size(); ++k) {
      if (k) rv += "\n" + ind;
      rv += lines[k];
      if (rv.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (std::size_t k = 1; k < lines.size(); ++k) {
      rv += "\n";
      if (!lines[k].empty()) rv += ind;
      rv += lines[k];
      if (rv.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
    }
  }
  if (first) rv = ind + rv;
  return Value::string(std::move(rv));
}

Value f_safe(Interpreter&, const Value& v, CallArgs&) { return v; }

Value f_escape(Interpreter&, const Value& v, CallArgs&) {
  std::string s = py_str(v), out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  if (out.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
  return Value::string(std::move(out));
}

Value f_format(Interpreter&, const Value& v, CallArgs& a) {
  Value args;
  if (!a.kw.empty()) {
    args = Value::make_dict();
    for (const auto& [k, x] : a.kw) args.dict->set(Value::string(k), x);
  } else {
    args = Value::make_list(a.pos, true);
  }
  return Value::string(percent_format(py_str(v), args));
}

Value f_batch(Interpreter&, const Value& v, CallArgs& a) {
  std::int64_t n = arg_int(a, 0, "linecount", 1);
  if (n <= 0) throw_invalid("batch size must be positive");
  const Value* fill = arg(a, 1, "fill_with");
  std::vector<Value> out, cur;
  for (const auto& item : iterate(v)) {
    cur.push_back(item);
    if (static_cast<std::int64_t>(cur.size()) == n) {
      out.push_back(Value::make_list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<std::int64_t>(cur.size()) < n) cur.push_back(*fill);
    out.push_back(Value::make_list(std::move(cur)));
  }
  return Value::make_list(std::move(out));
}

Value f_attr(Interpreter& in, const Value& v, CallArgs& a) {
  auto name = arg_str(a, 0, "name");
  if (!name) throw_invalid("attr needs a name");
  return in.get_attr(v, *name);
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs&) {
  return Value::integer(static_cast<std::int64_t>(py_split(py_str(v), std::nullopt, -1).size()));
}

Value f_center(Interpreter&, const Value& v, CallArgs& a) {
  std::string s = py_str(v);
  std::int64_t width = arg_int(a, 0, "width", 80);
  std::int64_t n = static_cast<std::int64_t>(cp_count(s));
  if (width > 100000) throw_invalid("center width too large");
  if (width <= n) return Value::string(s);
  std::int64_t marg = width - n;
  std::int64_t left = marg / 2 + (marg & width & 1);
  return Value::string(std::string(static_cast<std::size_t>(left), ' ') + s +
                       std::string(static_cast<std::size_t>(marg - left), ' '));
}

struct FilterEntry {
  const char* name;
  Filter fn;
};
const FilterEntry kFilters[] = {
    {"length", f_length},       {"count", f_length},       {"tojson", f_tojson},         {"trim", f_trim},
    {"upper", f_upper},         {"lower", f_lower},        {"title", f_title},           {"capitalize", f_capitalize},
    {"replace", f_replace},     {"join", f_join},          {"first", f_first},           {"last", f_last},
    {"default", f_default},     {"d", f_default},          {"string", f_string},         {"int", f_int},
    {"float", f_float},         {"list", f_list},          {"items", f_items},           {"dictsort", f_dictsort},
    {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"map", f_map},          {"select", f_select},
    {"reject", f_reject},       {"unique", f_unique},      {"reverse", f_reverse},       {"sort", f_sort},
    {"sum", f_sum},             {"min", f_min},            {"max", f_max},               {"round", f_round},
    {"abs", f_abs},             {"indent", f_indent},      {"safe", f_safe},             {"e", f_escape},
    {"escape", f_escape},       {"forceescape", f_escape}, {"format", f_format},         {"batch", f_batch},
    {"attr", f_attr},           {"wordcount", f_wordcount}, {"center", f_center},
};

// ---- tests -----------------------------------------------------------------
bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::kString; }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::kInt; }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::kFloat; }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::kBool; }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::kDict; }
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.kind == Kind::kString || v.kind == Kind::kList || v.kind == Kind::kDict || v.is_undefined();
}
bool t_sequence(Interpreter& in, const Value& v, CallArgs& a) { return t_iterable(in, v, a); }
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::kCallable; }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::kBool && v.b; }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::kBool && !v.b; }
bool t_odd(Interpreter&, const Value& v, CallArgs&) { return truthy(binary_op("%", v, Value::integer(2))); }
bool t_even(Interpreter&, const Value& v, CallArgs&) { return !truthy(binary_op("%", v, Value::integer(2))); }
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  const Value* n = arg(a, 0, "num");
  if (!n) throw_invalid("divisibleby needs an argument");
  return !truthy(binary_op("%", v, *n));
}
const Value& other(const CallArgs& a) {
  const Value* o = arg(a, 0, "other");
  if (!o) throw_invalid("comparison test needs an argument");
  return *o;
}
bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return py_equal(v, other(a)); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !py_equal(v, other(a)); }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return py_compare(v, other(a), ">") > 0; }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return py_compare(v, other(a), "<") < 0; }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return py_compare(v, other(a), ">=") >= 0; }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return py_compare(v, other(a), "<=") <= 0; }
bool t_in(Interpreter&, const Value& v, CallArgs& a) {
  const Value* seq = arg(a, 0, "seq");
  if (!seq) throw_invalid("'in' test needs an argument");
  return contains(*seq, v);
}
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = other(a);
  if (v.kind != o.kind) return false;
  switch (v.kind) {
    case Kind::kList: return v.list == o.list;
    case Kind::kDict: return v.dict == o.dict;
    case Kind::kNamespace: return v.ns == o.ns;
    case Kind::kCallable: return v.fn == o.fn;
    default: return py_equal(v, o);
  }
}
bool t_lower(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::kString && py_is_lower(v.s); }
bool t_upper(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::kString && py_is_upper(v.s); }
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }
bool t_filter(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::kString && has_filter(v.s); }
bool t_test(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::kString && has_test(v.s); }

struct TestEntry {
  const char* name;
  Test fn;
};
const TestEntry kTests[] = {
    {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},       {"string", t_string},
    {"number", t_number},     {"integer", t_integer},     {"float", t_float},     {"boolean", t_boolean},
    {"mapping", t_mapping},   {"iterable", t_iterable},   {"sequence", t_sequence}, {"callable", t_callable},
    {"true", t_true},         {"false", t_false},         {"odd", t_odd},         {"even", t_even},
    {"divisibleby", t_divisibleby}, {"eq", t_eq},         {"equalto", t_eq},      {"==", t_eq},
    {"ne", t_ne},             {"!=", t_ne},               {"gt", t_gt},           {">", t_gt},
    {"greaterthan", t_gt},    {"lt", t_lt},               {"<", t_lt},            {"lessthan", t_lt},
    {"ge", t_ge},             {">=", t_ge},               {"le", t_le},           {"<=", t_le},
    {"in", t_in},             {"sameas", t_sameas},       {"lower", t_lower},     {"upper", t_upper},
    {"escaped", t_escaped},   {"filter", t_filter},       {"test", t_test},
};

// ---- methods -----------------------------------------------------------------
Value bound(const Value& self, const std::string& name, Value (*fn)(const Value&, CallArgs&)) {
  return Value::callable(name, [self, fn](Interpreter&, CallArgs& a) { return fn(self, a); });
}

bool prefix_match(const Value& self, CallArgs& a, bool suffix) {
  const Value* p = arg(a, 0, "prefix");
  if (!p) throw_invalid(std::string(suffix ? "endswith" : "startswith") + "() takes at least 1 argument");
  std::string s = self.s;
  if (a.pos.size() > 1) {
    Value sl = slice(self, a.pos[1], a.pos.size() > 2 ? a.pos[2] : Value::none(), Value::none());
    s = sl.s;
  }
  auto one = [&](const Value& x) {
    const std::string& t = need_str(x, suffix ? "endswith" : "startswith");
    if (t.size() > s.size()) return false;
    return suffix ? s.compare(s.size() - t.size(), t.size(), t) == 0 : s.compare(0, t.size(), t) == 0;
  };
  if (p->kind == Kind::kList && p->tuple) {
    for (const auto& x : p->list->items)
      if (one(x)) return true;
    return false;
  }
  return one(*p);
}

Value list_of_strings(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::make_list(std::move(out));
}

std::string str_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  std::size_t auto_idx = 0;
  for (std::size_t k = 0; k < fmt.size(); ++k) {
    char c = fmt[k];
    if (c == '{' && k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out.push_back('{');
      ++k;
      continue;
    }
    if (c == '}' && k + 1 < fmt.size() && fmt[k + 1] == '}') {
      out.push_back('}');
      ++k;
      continue;
    }
    if (c == '}') throw_invalid("Single '}' encountered in format string");
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    std::size_t close = fmt.find('}', k);
    if (close == std::string::npos) throw_invalid("Single '{' encountered in format string");
    std::string field = fmt.substr(k + 1, close - k - 1);
    k = close;
    bool repr = false;
    if (field.find(':') != std::string::npos) throw_invalid("format specs in str.format are not supported");
    if (field.size() >= 2 && field[field.size() - 2] == '!') {
      repr = field.back() == 'r';
      field.resize(field.size() - 2);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_idx >= a.pos.size()) throw_invalid("Replacement index out of range for positional args tuple");
      v = &a.pos[auto_idx++];
    } else if (std::all_of(field.begin(), field.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      std::size_t idx = field.size() < 9 ? std::stoul(field) : SIZE_MAX;
      if (idx >= a.pos.size()) throw_invalid("Replacement index out of range for positional args tuple");
      v = &a.pos[idx];
    } else {
      for (const auto& [kname, kv] : a.kw)
        if (kname == field) v = &kv;
      if (!v) throw_invalid("KeyError: '" + field + "'");
    }
    out += repr ? py_repr(*v) : py_str(*v);
    if (out.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
  }
  return out;
}

Value string_method(const Value& self, const std::string& name) {
  using A = CallArgs;
  if (name == "startswith")
    return bound(self, name, [](const Value& s, A& a) { return Value::boolean(prefix_match(s, a, false)); });
  if (name == "endswith")
    return bound(self, name, [](const Value& s, A& a) { return Value::boolean(prefix_match(s, a, true)); });
  if (name == "strip")
    return bound(self, name, [](const Value& s, A& a) { return Value::string(py_strip(s.s, arg_str(a, 0, "chars"), true, true)); });
  if (name == "lstrip")
    return bound(self, name, [](const Value& s, A& a) { return Value::string(py_strip(s.s, arg_str(a, 0, "chars"), true, false)); });
  if (name == "rstrip")
    return bound(self, name, [](const Value& s, A& a) { return Value::string(py_strip(s.s, arg_str(a, 0, "chars"), false, true)); });
  if (name == "split")
    return bound(self, name, [](const Value& s, A& a) {
      return list_of_strings(py_split(s.s, arg_str(a, 0, "sep"), arg_int(a, 1, "maxsplit", -1)));
    });
  if (name == "rsplit")
    return bound(self, name, [](const Value& s, A& a) {
      return list_of_strings(py_rsplit(s.s, arg_str(a, 0, "sep"), arg_int(a, 1, "maxsplit", -1)));
    });
  if (name == "splitlines")
    return bound(self, name, [](const Value& s, A& a) {
      return list_of_strings(py_splitlines(s.s, arg_bool(a, 0, "keepends", false)));
    });
  if (name == "upper") return bound(self, name, [](const Value& s, A&) { return Value::string(py_upper(s.s)); });
  if (name == "lower") return bound(self, name, [](const Value& s, A&) { return Value::string(py_lower(s.s)); });
  if (name == "title") return bound(self, name, [](const Value& s, A&) { return Value::string(py_title(s.s)); });
  if (name == "capitalize")
    return bound(self, name, [](const Value& s, A&) { return Value::string(py_capitalize(s.s)); });
  if (name == "replace")
    return bound(self, name, [](const Value& s, A& a) {
      auto o = arg_str(a, 0, "old");
      auto n = arg_str(a, 1, "new");
      if (!o || !n) throw_invalid("replace() takes at least 2 arguments");
      return Value::string(py_replace(s.s, *o, *n, arg_int(a, 2, "count", -1)));
    });
  if (name == "count")
    return bound(self, name, [](const Value& s, A& a) {
      auto sub = arg_str(a, 0, "sub");
      if (!sub) throw_invalid("count() takes at least 1 argument");
      return Value::integer(py_count(s.s, *sub));
    });
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    bool rev = name[0] == 'r';
    bool raise = name.find("index") != std::string::npos;
    if (rev)
      return bound(self, name, raise ? +[](const Value& s, A& a) {
        auto sub = arg_str(a, 0, "sub");
        if (!sub) throw_invalid("rindex() takes at least 1 argument");
        auto r = py_find(s.s, *sub, true);
        if (r < 0) throw_invalid("substring not found");
        return Value::integer(r);
      } : +[](const Value& s, A& a) {
        auto sub = arg_str(a, 0, "sub");
        if (!sub) throw_invalid("rfind() takes at least 1 argument");
        return Value::integer(py_find(s.s, *sub, true));
      });
    return bound(self, name, raise ? +[](const Value& s, A& a) {
      auto sub = arg_str(a, 0, "sub");
      if (!sub) throw_invalid("index() takes at least 1 argument");
      auto r = py_find(s.s, *sub, false);
      if (r < 0) throw_invalid("substring not found");
      return Value::integer(r);
    } : +[](const Value& s, A& a) {
      auto sub = arg_str(a, 0, "sub");
      if (!sub) throw_invalid("find() takes at least 1 argument");
      return Value::integer(py_find(s.s, *sub, false));
    });
  }
  if (name == "format") return bound(self, name, [](const Value& s, A& a) { return Value::string(str_format(s.s, a)); });
  if (name == "join")
    return bound(self, name, [](const Value& s, A& a) {
      if (a.pos.empty()) throw_invalid("join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (const auto& item : iterate(a.pos[0])) {
        if (!first) out += s.s;
        first = false;
        out += need_str(item, "str.join");
        if (out.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
      }
      return Value::string(std::move(out));
    });
  if (name == "removeprefix" || name == "removesuffix") {
    if (name == "removeprefix")
      return bound(self, name, [](const Value& s, A& a) {
        auto p = arg_str(a, 0, "prefix").value_or("");
        return Value::string(s.s.compare(0, p.size(), p) == 0 ? s.s.substr(p.size()) : s.s);
      });
    return bound(self, name, [](const Value& s, A& a) {
      auto p = arg_str(a, 0, "suffix").value_or("");
      bool m = p.size() <= s.s.size() && s.s.compare(s.s.size() - p.size(), p.size(), p) == 0;
      return Value::string(m && !p.empty() ? s.s.substr(0, s.s.size() - p.size()) : s.s);
    });
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal")
    return bound(self, name, [](const Value& s, A&) {
      return Value::boolean(!s.s.empty() && std::all_of(s.s.begin(), s.s.end(), [](char c) { return c >= '0' && c <= '9'; }));
    });
  if (name == "isalpha")
    return bound(self, name, [](const Value& s, A&) {
      return Value::boolean(!s.s.empty() && std::all_of(s.s.begin(), s.s.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }));
    });
  if (name == "isalnum")
    return bound(self, name, [](const Value& s, A&) {
      return Value::boolean(!s.s.empty() && std::all_of(s.s.begin(), s.s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }));
    });
  if (name == "isspace")
    return bound(self, name, [](const Value& s, A&) {
      return Value::boolean(!s.s.empty() && py_strip(s.s, std::nullopt, true, true).empty());
    });
  if (name == "isupper") return bound(self, name, [](const Value& s, A&) { return Value::boolean(py_is_upper(s.s)); });
  if (name == "islower") return bound(self, name, [](const Value& s, A&) { return Value::boolean(py_is_lower(s.s)); });
  return Value::undefined("'str object' has no attribute '" + name + "'");
}

Value dict_method(const Value& self, const std::string& name) {
  using A = CallArgs;
  if (name == "get")
    return bound(self, name, [](const Value& d, A& a) {
      if (a.pos.empty()) throw_invalid("get expected at least 1 argument, got 0");
      if (!hashable(a.pos[0])) throw_invalid("unhashable type: '" + type_name(a.pos[0]) + "'");
      const Value* v = d.dict->find(a.pos[0]);
      if (v) return *v;
      return a.pos.size() > 1 ? a.pos[1] : Value::none();
    });
  if (name == "items") return bound(self, name, [](const Value& d, A&) {
      std::vector<Value> out;
      for (const auto& [k, x] : d.dict->items) out.push_back(Value::make_list({k, x}, true));
      return Value::make_list(std::move(out));
    });
  if (name == "keys") return bound(self, name, [](const Value& d, A&) { return Value::make_list(iterate(d)); });
  if (name == "values") return bound(self, name, [](const Value& d, A&) {
      std::vector<Value> out;
      for (const auto& kv : d.dict->items) out.push_back(kv.second);
      return Value::make_list(std::move(out));
    });
  if (name == "copy") return bound(self, name, [](const Value& d, A&) {
      Value c = Value::make_dict();
      c.dict->items = d.dict->items;
      return c;
    });
  static const char* const kUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
  for (const char* u : kUnsafe)
    if (name == u) return Value::undefined("access to attribute '" + name + "' of 'dict' object is unsafe.");
  return Value::undefined();
}

Value list_method(const Value& self, const std::string& name) {
  using A = CallArgs;
  if (name == "index")
    return bound(self, name, [](const Value& l, A& a) {
      if (a.pos.empty()) throw_invalid("index expected at least 1 argument");
      for (std::size_t k = 0; k < l.list->items.size(); ++k)
        if (py_equal(l.list->items[k], a.pos[0])) return Value::integer(static_cast<std::int64_t>(k));
      throw_invalid(py_repr(a.pos[0]) + " is not in list");
    });
  if (name == "count")
    return bound(self, name, [](const Value& l, A& a) {
      if (a.pos.empty()) throw_invalid("count() takes exactly one argument");
      std::int64_t n = 0;
      for (const auto& x : l.list->items) n += py_equal(x, a.pos[0]);
      return Value::integer(n);
    });
  if (name == "copy" && !self.tuple) return bound(self, name, [](const Value& l, A&) { return Value::make_list(l.list->items); });
  if (!self.tuple) {
    static const char* const kUnsafe[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
    for (const char* u : kUnsafe)
      if (name == u) return Value::undefined("access to attribute '" + name + "' of 'list' object is unsafe.");
  }
  return Value::undefined();
}

// ---- globals -----------------------------------------------------------------
Value g_range(Interpreter& in, CallArgs& a) {
  std::int64_t start = 0, stop = 0, step = 1;
  if (a.pos.size() == 1) {
    stop = as_index(a.pos[0], "range() arguments");
  } else if (a.pos.size() == 2 || a.pos.size() == 3) {
    start = as_index(a.pos[0], "range() arguments");
    stop = as_index(a.pos[1], "range() arguments");
    if (a.pos.size() == 3) step = as_index(a.pos[2], "range() arguments");
  } else {
    throw_invalid("range expected 1 to 3 arguments");
  }
  if (step == 0) throw_invalid("range() arg 3 must not be zero");
  long double count = step > 0 ? (stop > start ? ((long double)stop - start + step - 1) / step : 0)
                               : (start > stop ? ((long double)start - stop - step - 1) / -step : 0);
  if (count > 100000) throw_invalid("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  std::vector<Value> out;
  for (std::int64_t k = start; step > 0 ? k < stop : k > stop; k += step) out.push_back(Value::integer(k));
  in.step(out.size() / 16);
  return Value::make_list(std::move(out));
}

Value g_dict(Interpreter&, CallArgs& a) {
  Value d = Value::make_dict();
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.kind == Kind::kDict) {
      d.dict->items = src.dict->items;
    } else {
      for (const auto& item : iterate(src)) {
        if (item.kind != Kind::kList || item.list->items.size() != 2)
          throw_invalid("dictionary update sequence element has wrong length");
        if (!hashable(item.list->items[0])) throw_invalid("unhashable type");
        d.dict->set(item.list->items[0], item.list->items[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kw) d.dict->set(Value::string(k), v);
  return d;
}

Value g_namespace(Interpreter& in, CallArgs& a) {
  Value d = g_dict(in, a);
  Value ns = Value::make_namespace("Namespace", false);
  for (const auto& [k, v] : d.dict->items) {
    if (k.kind != Kind::kString) throw_invalid("namespace keywords must be strings");
    ns.ns->attrs.set(k, v);
  }
  return ns;
}

Value g_raise_exception(Interpreter&, CallArgs& a) {
  std::string msg = a.pos.empty() ? std::string() : py_str(a.pos[0]);
  throw TemplateRaised(msg);
}

Value g_strftime_now(Interpreter&, CallArgs& a) {
  if (a.pos.empty()) throw_invalid("strftime_now() missing format");
  const std::string& fmt = need_str(a.pos[0], "strftime_now");
  if (fmt.size() > 256) throw_invalid("strftime_now format too long");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[4096];
  std::size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
  return Value::string(std::string(buf, n));
}

}  // namespace

bool has_filter(const std::string& name) {
  for (const auto& f : kFilters)
    if (name == f.name) return true;
  return false;
}

bool has_test(const std::string& name) {
  for (const auto& t : kTests)
    if (name == t.name) return true;
  return false;
}

Value builtin_filter(Interpreter& in, const std::string& name, const Value& v, CallArgs& args) {
  for (const auto& f : kFilters)
    if (name == f.name) return f.fn(in, v, args);
  throw_invalid("no filter named '" + name + "'");
}

bool builtin_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args) {
  for (const auto& t : kTests)
    if (name == t.name) return t.fn(in, v, args);
  throw_invalid("no test named '" + name + "'");
}

Value builtin_method(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Kind::kString: return string_method(obj, name);
    case Kind::kDict: return dict_method(obj, name);
    case Kind::kList: return list_method(obj, name);
    default: return Value::undefined();
  }
}

void install_globals(Frame& g) {
  g.vars["range"] = Value::callable("range", g_range);
  g.vars["dict"] = Value::callable("dict", g_dict);
  g.vars["namespace"] = Value::callable("namespace", g_namespace);
  g.vars["raise_exception"] = Value::callable("raise_exception", g_raise_exception);
  g.vars["strftime_now"] = Value::callable("strftime_now", g_strftime_now);
}

}  // namespace hipformers::chat
