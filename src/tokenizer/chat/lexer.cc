#include "lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "hipformers/core/error.h"
#include "hipformers/core/utf8.h"

namespace hipformers::chat {

const char* token_type_name(Tok t) {
  switch (t) {
    case Tok::kData: return "template data";
    case Tok::kVarBegin: return "'{{'";
    case Tok::kVarEnd: return "'}}'";
    case Tok::kBlockBegin: return "'{%'";
    case Tok::kBlockEnd: return "'%}'";
    case Tok::kName: return "name";
    case Tok::kString: return "string";
    case Tok::kInt: return "integer";
    case Tok::kFloat: return "float";
    case Tok::kOp: return "operator";
    case Tok::kEof: return "end of template";
  }
  return "token";
}

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& name) : name_(name) {
    // jinja2 splits on \r\n, \r, \n and joins with \n; without
    // keep_trailing_newline one final newline is dropped.
    src_.reserve(source.size());
    for (std::size_t k = 0; k < source.size(); ++k) {
      char c = source[k];
      if (c == '\r') {
        if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
        src_.push_back('\n');
      } else {
        src_.push_back(c);
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (std::size_t k = 0; k < src_.size(); ++k)
      if (src_[k] == '\n') line_starts_.push_back(k + 1);
  }

  std::vector<Token> run() {
    std::size_t pos = 0;
    const std::size_t n = src_.size();
    while (pos < n) {
      std::size_t start = find_tag(pos);
      if (start == std::string::npos) {
        emit_data(src_.substr(pos), pos);
        break;
      }
      std::string text = src_.substr(pos, start - pos);
      char kind = src_[start + 1];
      char mod = start + 2 < n ? src_[start + 2] : '\0';
      bool line_starting = pos == 0 || src_[pos - 1] == '\n';
      std::size_t p = start + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      // {% raw %} ... {% endraw %}
      if (kind == '%') {
        std::size_t after = 0;
        if (match_keyword_tag(p, "raw", &after)) {
          apply_left_control(text, mod, kind, line_starting);
          emit_data(text, pos);
          std::size_t content_start = after;
          bool strip_content_left = src_[after - 3] == '-';
          std::size_t end_start = 0, end_after = 0;
          char end_mod = 0;
          if (!find_endraw(content_start, &end_start, &end_after, &end_mod))
            fail(start, "missing end of raw directive");
          std::string content = src_.substr(content_start, end_start - content_start);
          if (strip_content_left) {
            std::size_t k = 0;
            while (k < content.size() && is_ws(content[k])) ++k;
            content.erase(0, k);
          }
          bool content_line_start = content_start > 0 && src_[content_start - 1] == '\n';
          apply_left_control(content, end_mod, '%', content_line_start);
          emit_data(content, content_start);
          pos = apply_right_control(end_after, src_[end_after - 3], true);
          continue;
        }
      }
      apply_left_control(text, mod, kind, line_starting);
      emit_data(text, pos);
      if (kind == '#') {
        std::size_t end = src_.find("#}", p);
        if (end == std::string::npos) fail(start, "missing end of comment tag");
        char before = end > p ? src_[end - 1] : '\0';
        pos = apply_right_control(end + 2, before, true);
        continue;
      }
      pos = lex_tag(start, p, kind);
    }
    Token eof;
    eof.type = Tok::kEof;
    set_pos(eof, src_.size());
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  std::size_t find_tag(std::size_t from) const {
    for (std::size_t k = from; k + 1 < src_.size(); ++k)
      if (src_[k] == '{' && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    return std::string::npos;
  }

  // Whitespace control on the data before a tag.
  void apply_left_control(std::string& text, char mod, char kind, bool line_starting) {
    if (mod == '-') {
      std::size_t k = text.size();
      while (k > 0 && is_ws(text[k - 1])) --k;
      text.resize(k);
    } else if (mod != '+' && kind != '{') {
      std::size_t nl = text.rfind('\n');
      std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        bool only_blank = std::all_of(text.begin() + l_pos, text.end(), [](char c) { return c == ' ' || c == '\t'; });
        if (only_blank) text.resize(l_pos);
      }
    }
  }

  // Whitespace control after a tag end at `after` (one past the closing
  // delimiter); `before` is the character before the delimiter.
  std::size_t apply_right_control(std::size_t after, char before, bool block) {
    if (before == '-') {
      while (after < src_.size() && is_ws(src_[after])) ++after;
    } else if (block && before != '+') {
      if (after < src_.size() && src_[after] == '\n') ++after;
    }
    return after;
  }

  bool match_keyword_tag(std::size_t p, std::string_view word, std::size_t* after) const {
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, word.size(), word) != 0) return false;
    p += word.size();
    if (p < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) return false;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    if (src_.compare(p, 2, "%}") != 0) return false;
    *after = p + 2;
    return true;
  }

  bool find_endraw(std::size_t from, std::size_t* start, std::size_t* after, char* mod) const {
    for (std::size_t k = src_.find("{%", from); k != std::string::npos; k = src_.find("{%", k + 1)) {
      std::size_t p = k + 2;
      char m = '\0';
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) m = src_[p++];
      std::size_t a = 0;
      if (match_keyword_tag(p, "endraw", &a)) {
        *start = k;
        *after = a;
        *mod = m;
        return true;
      }
    }
    return false;
  }

  void emit_data(std::string text, std::size_t at) {
    if (text.empty()) return;
    Token t;
    t.type = Tok::kData;
    t.text = std::move(text);
    set_pos(t, at);
    tokens_.push_back(std::move(t));
  }

  void set_pos(Token& t, std::size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    std::size_t line = static_cast<std::size_t>(it - line_starts_.begin());
    t.line = static_cast<int>(line);
    t.col = static_cast<int>(offset - line_starts_[line - 1] + 1);
  }

  [[noreturn]] void fail(std::size_t offset, const std::string& msg) const {
    Token t;
    set_pos(t, offset);
    throw_invalid(name_ + " line " + std::to_string(t.line) + ", column " + std::to_string(t.col) + ": " + msg);
  }

  std::size_t lex_tag(std::size_t start, std::size_t p, char kind) {
    Token begin;
    begin.type = kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin;
    set_pos(begin, start);
    tokens_.push_back(begin);
    std::vector<char> balance;
    const std::size_t n = src_.size();
    while (true) {
      while (p < n && is_ws(src_[p])) ++p;
      if (p >= n) fail(start, std::string("unexpected end of template, missing '") + (kind == '{' ? "}}" : "%}") + "'");
      if (balance.empty()) {
        const char* close = kind == '{' ? "}}" : "%}";
        std::size_t len = 0;
        char before = '\0';
        if ((src_[p] == '-' || (kind == '%' && src_[p] == '+')) && src_.compare(p + 1, 2, close) == 0) {
          before = src_[p];
          len = 3;
        } else if (src_.compare(p, 2, close) == 0) {
          len = 2;
        }
        if (len) {
          Token end;
          end.type = kind == '{' ? Tok::kVarEnd : Tok::kBlockEnd;
          set_pos(end, p);
          tokens_.push_back(end);
          return apply_right_control(p + len, before, kind == '%');
        }
      }
      p = lex_token(p, balance);
    }
  }

  std::size_t lex_token(std::size_t p, std::vector<char>& balance) {
    const std::size_t n = src_.size();
    Token t;
    set_pos(t, p);
    char c = src_[p];
    if (c == '\'' || c == '"') {
      std::size_t k = p + 1;
      while (k < n && src_[k] != c) {
        if (src_[k] == '\\') ++k;
        ++k;
      }
      if (k >= n) fail(p, "unterminated string literal");
      t.type = Tok::kString;
      t.text = decode_string_literal(std::string_view(src_).substr(p + 1, k - p - 1),
                                     name_ + " line " + std::to_string(t.line));
      tokens_.push_back(std::move(t));
      return k + 1;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number(p, t);
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t k = p;
      while (k < n && (std::isalnum(static_cast<unsigned char>(src_[k])) || src_[k] == '_')) ++k;
      t.type = Tok::kName;
      t.text = src_.substr(p, k - p);
      tokens_.push_back(std::move(t));
      return k;
    }
    static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]",
                                       "(",  ")",  "{",  "}",  ">",  "<",  "=", ".", ":", "|", ",", ";"};
    for (const char* op : kOps) {
      std::size_t len = std::char_traits<char>::length(op);
      if (src_.compare(p, len, op) == 0) {
        if (len == 1 && (c == '(' || c == '[' || c == '{')) {
          if (balance.size() > 256) fail(p, "brackets nested too deeply");
          balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
        } else if (len == 1 && (c == ')' || c == ']' || c == '}')) {
          if (balance.empty()) fail(p, std::string("unexpected '") + c + "'");
          if (balance.back() != c)
            fail(p, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
          balance.pop_back();
        }
        t.type = Tok::kOp;
        t.text = op;
        tokens_.push_back(std::move(t));
        return p + len;
      }
    }
    std::size_t k = p;
    std::size_t cp_len = utf8::sequence_length(static_cast<unsigned char>(c));
    std::string shown = src_.substr(k, std::min(cp_len, n - k));
    if (!utf8::is_valid(shown)) shown = "\\x" + std::string(1, "0123456789abcdef"[(c >> 4) & 15]) + "0123456789abcdef"[c & 15];
    fail(p, "unexpected character '" + shown + "'");
  }

  std::size_t lex_number(std::size_t p, Token& t) {
    const std::size_t n = src_.size();
    auto digits = [&](std::size_t k, auto pred) {
      std::size_t s = k;
      while (k < n && (pred(src_[k]) || (src_[k] == '_' && k > s && k + 1 < n && pred(src_[k + 1])))) ++k;
      return k;
    };
    auto dec = [](char ch) { return ch >= '0' && ch <= '9'; };
    std::string clean;
    auto strip_us = [&](std::size_t a, std::size_t b) {
      std::string out;
      for (std::size_t k = a; k < b; ++k)
        if (src_[k] != '_') out.push_back(src_[k]);
      return out;
    };
    if (src_[p] == '0' && p + 1 < n && std::strchr("xXoObB", src_[p + 1]) && src_[p + 1] != '\0') {
      char base_c = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[p + 1])));
      int base = base_c == 'x' ? 16 : base_c == 'o' ? 8 : 2;
      std::size_t k = p + 2;
      if (k < n && src_[k] == '_') ++k;
      std::size_t e = digits(k, [base](char ch) {
        int v = hex_value(ch);
        return v >= 0 && v < base;
      });
      if (e == k) fail(p, "invalid number literal");
      std::string body = strip_us(k, e);
      errno = 0;
      char* endp = nullptr;
      unsigned long long v = std::strtoull(body.c_str(), &endp, base);
      if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) fail(p, "integer literal too large");
      t.type = Tok::kInt;
      t.ival = static_cast<std::int64_t>(v);
      tokens_.push_back(std::move(t));
      return e;
    }
    std::size_t k = digits(p, dec);
    bool is_float = false;
    if (k + 1 < n && src_[k] == '.' && dec(src_[k + 1])) {
      k = digits(k + 1, dec);
      is_float = true;
    }
    if (k < n && (src_[k] == 'e' || src_[k] == 'E')) {
      std::size_t e = k + 1;
      if (e < n && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < n && dec(src_[e])) {
        k = digits(e, dec);
        is_float = true;
      }
    }
    std::string body = strip_us(p, k);
    if (is_float) {
      t.type = Tok::kFloat;
      t.fval = std::strtod(body.c_str(), nullptr);
    } else {
      errno = 0;
      unsigned long long v = std::strtoull(body.c_str(), nullptr, 10);
      if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) fail(p, "integer literal too large");
      t.type = Tok::kInt;
      t.ival = static_cast<std::int64_t>(v);
    }
    tokens_.push_back(std::move(t));
    return k;
  }

  const std::string& name_;
  std::string src_;
  std::vector<std::size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::string decode_string_literal(std::string_view body, const std::string& where) {
  std::string out;
  out.reserve(body.size());
  std::size_t k = 0;
  auto bad = [&](const std::string& msg) { throw_invalid(where + ": " + msg + " in string literal"); };
  auto append_cp = [&](std::uint32_t cp) {
    if (cp > 0x10FFFF) bad("illegal Unicode character");
    if (cp >= 0xD800 && cp <= 0xDFFF) bad("unsupported surrogate escape");
    utf8::append(out, static_cast<char32_t>(cp));
  };
  while (k < body.size()) {
    char c = body[k];
    if (c != '\\') {
      out.push_back(c);
      ++k;
      continue;
    }
    if (k + 1 >= body.size()) bad("trailing backslash");
    char e = body[k + 1];
    k += 2;
    switch (e) {
      case '\n': break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x':
      case 'u':
      case 'U': {
        std::size_t len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        std::uint32_t cp = 0;
        for (std::size_t d = 0; d < len; ++d) {
          if (k + d >= body.size() || hex_value(body[k + d]) < 0)
            bad(std::string("truncated \\") + e + " escape");
          cp = cp * 16 + static_cast<std::uint32_t>(hex_value(body[k + d]));
        }
        k += len;
        append_cp(cp);
        break;
      }
      case 'N':
        bad("unsupported \\N{...} escape");
        break;  // not reached: bad() throws
      default:
        if (e >= '0' && e <= '7') {
          std::uint32_t cp = static_cast<std::uint32_t>(e - '0');
          for (int d = 0; d < 2 && k < body.size() && body[k] >= '0' && body[k] <= '7'; ++d, ++k)
            cp = cp * 8 + static_cast<std::uint32_t>(body[k] - '0');
          append_cp(cp);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

std::vector<Token> lex(std::string_view source, const std::string& name) { return Lexer(source, name).run(); }

}  // namespace hipformers::chat
