#include "pystring.h"

#include <algorithm>

#include "hipformers/core/error.h"
#include "hipformers/core/utf8.h"
#include "value.h"

namespace hipformers::chat {

std::vector<std::size_t> cp_offsets(std::string_view s) {
  std::vector<std::size_t> out;
  out.reserve(s.size() + 1);
  std::size_t pos = 0;
  while (pos < s.size()) {
    out.push_back(pos);
    utf8::decode(s, pos);
  }
  out.push_back(s.size());
  return out;
}

std::size_t cp_count(std::string_view s) { return utf8::count_code_points(s); }

bool py_isspace(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

namespace {

std::vector<char32_t> decode_all(std::string_view s) {
  std::vector<char32_t> out;
  std::size_t pos = 0;
  while (pos < s.size()) out.push_back(utf8::decode(s, pos));
  return out;
}

char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
  if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}

bool is_cased(char32_t c) { return to_upper(c) != c || to_lower(c) != c; }

bool in_chars(char32_t c, const std::optional<std::string>& chars, const std::vector<char32_t>& set) {
  if (!chars) return py_isspace(c);
  for (char32_t x : set)
    if (x == c) return true;
  return false;
}

void check_sep(const std::optional<std::string>& sep) {
  if (sep && sep->empty()) throw_invalid("empty separator");
}

}  // namespace

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (chars) set = decode_all(*chars);
  auto offs = cp_offsets(s);
  std::size_t n = offs.size() - 1;
  std::size_t a = 0, b = n;
  auto cp_at = [&](std::size_t k) {
    std::size_t p = offs[k];
    return utf8::decode(s, p);
  };
  if (left)
    while (a < b && in_chars(cp_at(a), chars, set)) ++a;
  if (right)
    while (b > a && in_chars(cp_at(b - 1), chars, set)) --b;
  return std::string(s.substr(offs[a], offs[b] - offs[a]));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit) {
  check_sep(sep);
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    std::size_t pos = 0;
    while (static_cast<std::int64_t>(out.size()) < maxsplit) {
      std::size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
      if (out.size() > kMaxListItems) throw_invalid("split produced too many items");
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  auto offs = cp_offsets(s);
  std::size_t n = offs.size() - 1, k = 0;
  auto cp_at = [&](std::size_t i) {
    std::size_t p = offs[i];
    return utf8::decode(s, p);
  };
  while (true) {
    while (k < n && py_isspace(cp_at(k))) ++k;
    if (k >= n) break;
    if (static_cast<std::int64_t>(out.size()) >= maxsplit) {
      out.emplace_back(s.substr(offs[k]));
      break;
    }
    std::size_t start = k;
    while (k < n && !py_isspace(cp_at(k))) ++k;
    out.emplace_back(s.substr(offs[start], offs[k] - offs[start]));
    if (out.size() > kMaxListItems) throw_invalid("split produced too many items");
  }
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, maxsplit);
  check_sep(sep);
  std::vector<std::string> out;
  if (sep) {
    std::size_t end = s.size();
    while (static_cast<std::int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      std::size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    auto offs = cp_offsets(s);
    auto cp_at = [&](std::size_t i) {
      std::size_t p = offs[i];
      return utf8::decode(s, p);
    };
    std::size_t k = offs.size() - 1;
    while (true) {
      while (k > 0 && py_isspace(cp_at(k - 1))) --k;
      if (k == 0) break;
      if (static_cast<std::int64_t>(out.size()) >= maxsplit) {
        out.emplace_back(s.substr(0, offs[k]));
        break;
      }
      std::size_t end = k;
      while (k > 0 && !py_isspace(cp_at(k - 1))) --k;
      out.emplace_back(s.substr(offs[k], offs[end] - offs[k]));
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  std::size_t pos = 0, line_start = 0;
  while (pos < s.size()) {
    std::size_t at = pos;
    char32_t c = utf8::decode(s, pos);
    bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
               c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    if (c == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    out.emplace_back(s.substr(line_start, (keepends ? pos : at) - line_start));
    line_start = pos;
    if (out.size() > kMaxListItems) throw_invalid("splitlines produced too many items");
  }
  if (line_start < s.size()) out.emplace_back(s.substr(line_start));
  return out;
}

std::string py_upper(std::string_view s) {
  std::string out;
  for (char32_t c : decode_all(s)) utf8::append(out, to_upper(c));
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  for (char32_t c : decode_all(s)) utf8::append(out, to_lower(c));
  return out;
}

std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : decode_all(s)) {
    utf8::append(out, prev_cased ? to_lower(c) : to_upper(c));
    prev_cased = is_cased(c);
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t c : decode_all(s)) {
    utf8::append(out, first ? to_upper(c) : to_lower(c));
    first = false;
  }
  return out;
}

std::string jinja_title(std::string_view s) {
  // Words start after any run of '-', whitespace, '(', '{', '[', '<'.
  std::string out;
  bool start = true;
  for (char32_t c : decode_all(s)) {
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
    if (sep) {
      utf8::append(out, c);
      start = true;
    } else {
      utf8::append(out, start ? to_upper(c) : to_lower(c));
      start = false;
    }
  }
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, std::int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  auto grow = [&](std::string_view piece) {
    out += piece;
    if (out.size() > kMaxStringBytes) throw_invalid("string too large (over 64 MiB)");
  };
  if (old.empty()) {
    auto offs = cp_offsets(s);
    std::int64_t done = 0;
    for (std::size_t k = 0; k + 1 < offs.size(); ++k) {
      if (done < count) {
        grow(repl);
        ++done;
      }
      grow(s.substr(offs[k], offs[k + 1] - offs[k]));
    }
    if (done < count) grow(repl);
    return out;
  }
  std::size_t pos = 0;
  std::int64_t done = 0;
  while (done < count) {
    std::size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    grow(s.substr(pos, f - pos));
    grow(repl);
    pos = f + old.size();
    ++done;
  }
  grow(s.substr(pos));
  return out;
}

std::int64_t py_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<std::int64_t>(cp_count(s)) + 1;
  std::int64_t n = 0;
  for (std::size_t f = s.find(sub); f != std::string_view::npos; f = s.find(sub, f + sub.size())) ++n;
  return n;
}

std::int64_t py_find(std::string_view s, std::string_view sub, bool reverse) {
  std::size_t f = reverse ? s.rfind(sub) : s.find(sub);
  if (f == std::string_view::npos) return -1;
  return static_cast<std::int64_t>(cp_count(s.substr(0, f)));
}

bool py_is_upper(std::string_view s) {
  bool any = false;
  for (char32_t c : decode_all(s)) {
    if (to_upper(c) != c) return false;
    if (to_lower(c) != c) any = true;
  }
  return any;
}

bool py_is_lower(std::string_view s) {
  bool any = false;
  for (char32_t c : decode_all(s)) {
    if (to_lower(c) != c) return false;
    if (to_upper(c) != c) any = true;
  }
  return any;
}

}  // namespace hipformers::chat
