#include "python_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "hipformers/core/error.h"
#include "hipformers/core/utf8.h"

namespace hipformers::chat {

namespace {

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {}

  void value(const Value& v, int level) {
    if (level > kMaxDepth) throw_invalid("maximum recursion depth exceeded in tojson");
    if (out.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
    switch (v.kind) {
      case Kind::kNone: out += "null"; return;
      case Kind::kBool: out += v.b ? "true" : "false"; return;
      case Kind::kInt: out += std::to_string(v.i); return;
      case Kind::kFloat: out += float_str(v.f); return;
      case Kind::kString: string(v.s); return;
      case Kind::kList: {
        if (v.list->items.empty()) {
          out += "[]";
          return;
        }
        out.push_back('[');
        bool first = true;
        for (const auto& item : v.list->items) {
          separator(first, level + 1);
          first = false;
          value(item, level + 1);
        }
        close(level);
        out.push_back(']');
        return;
      }
      case Kind::kDict: {
        if (v.dict->items.empty()) {
          out += "{}";
          return;
        }
        std::vector<const std::pair<Value, Value>*> items;
        for (const auto& kv : v.dict->items) items.push_back(&kv);
        if (o_.sort_keys)
          std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) {
            return py_compare(a->first, b->first, "<") < 0;
          });
        out.push_back('{');
        bool first = true;
        for (const auto* kv : items) {
          separator(first, level + 1);
          first = false;
          string(key_string(kv->first));
          out += o_.key_separator;
          value(kv->second, level + 1);
        }
        close(level);
        out.push_back('}');
        return;
      }
      default:
        throw_invalid("Object of type " + type_name(v) + " is not JSON serializable");
    }
  }

  std::string out;

 private:
  static std::string float_str(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
    return float_repr(d);
  }

  std::string key_string(const Value& k) {
    switch (k.kind) {
      case Kind::kString: return k.s;
      case Kind::kInt: return std::to_string(k.i);
      case Kind::kFloat: return float_str(k.f);
      case Kind::kBool: return k.b ? "true" : "false";
      case Kind::kNone: return "null";
      default: throw_invalid("keys must be str, int, float, bool or None, not " + type_name(k));
    }
  }

  void separator(bool first, int level) {
    if (!first) out += o_.item_separator;
    if (o_.has_indent) {
      out.push_back('\n');
      for (int k = 0; k < level; ++k) out += o_.indent;
    }
  }

  void close(int level) {
    if (o_.has_indent) {
      out.push_back('\n');
      for (int k = 0; k < level; ++k) out += o_.indent;
    }
  }

  void string(const std::string& s) {
    out.push_back('"');
    std::size_t pos = 0;
    char buf[16];
    while (pos < s.size()) {
      unsigned char c = static_cast<unsigned char>(s[pos]);
      if (c < 0x80) {
        ++pos;
        switch (c) {
          case '"': out += "\\\""; break;
          case '\\': out += "\\\\"; break;
          case '\n': out += "\\n"; break;
          case '\r': out += "\\r"; break;
          case '\t': out += "\\t"; break;
          case '\b': out += "\\b"; break;
          case '\f': out += "\\f"; break;
          default:
            if (c < 0x20 || (o_.ensure_ascii && c == 0x7f)) {
              if (c == 0x7f) {
                out.push_back(static_cast<char>(c));
                break;
              }
              std::snprintf(buf, sizeof buf, "\\u%04x", c);
              out += buf;
            } else {
              out.push_back(static_cast<char>(c));
            }
        }
        continue;
      }
      std::size_t start = pos;
      char32_t cp = utf8::decode(s, pos);
      if (!o_.ensure_ascii) {
        out.append(s, start, pos - start);
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(cp));
        out += buf;
      } else {
        unsigned v = unsigned(cp) - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
        out += buf;
      }
    }
    out.push_back('"');
  }

  const JsonDumpOptions& o_;
};

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
  Dumper d(options);
  d.value(v, 0);
  if (d.out.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
  return std::move(d.out);
}

}  // namespace hipformers::chat
