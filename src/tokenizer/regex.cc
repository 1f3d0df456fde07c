#include "regex.h"

#include <algorithm>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "hipformers/core/error.h"
#include "hipformers/core/utf8.h"

namespace hipformers::tok {
namespace {

// Oniguruma's Unicode sets (see the header comment). Written as the inside of
// a character class so they can be combined with other class items.
constexpr const char* kSpaceSet = "\\t-\\r\\x{85}\\p{Z}";
constexpr const char* kWordSet = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";
constexpr const char* kHexSet = "0-9a-fA-F";

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Copies `\p{...}` / `\P{...}` / `\pL` starting at p[i] == '\\'; handles the
// Oniguruma negation form \p{^X}. Returns the index after it.
std::size_t copy_property(std::string_view p, std::size_t i, std::string& out, const std::string& what) {
  char kind = p[i + 1];  // 'p' or 'P'
  if (i + 2 >= p.size()) throw_invalid(what + ": truncated \\" + std::string(1, kind) + " escape");
  if (p[i + 2] != '{') {
    out.append(p.substr(i, 3));
    return i + 3;
  }
  std::size_t close = p.find('}', i + 3);
  if (close == std::string_view::npos) throw_invalid(what + ": unterminated \\" + std::string(1, kind) + "{...}");
  std::string_view name = p.substr(i + 3, close - i - 3);
  if (!name.empty() && name[0] == '^') {
    kind = kind == 'p' ? 'P' : 'p';
    name.remove_prefix(1);
  }
  out += '\\';
  out += kind;
  out += '{';
  out.append(name);
  out += '}';
  return close + 1;
}

// Length of the escape sequence body after the backslash for escapes copied
// verbatim (a multi-byte UTF-8 character counts whole).
std::size_t escaped_char_length(std::string_view p, std::size_t i) {
  return utf8::sequence_length(static_cast<unsigned char>(p[i]));
}

// Translates a character class starting at p[i] == '['. Items whose meaning
// is a complement (\S, \W, \H) cannot be merged into a PCRE2 class, so they
// are kept apart and the class becomes an alternation / lookahead group.
// Escapes that mean the same inside and outside a bracket class: \d, \D,
// \p{..}, \P{..}, \uXXXX and escaped literals. `p[i]` is the backslash;
// appends the PCRE2 spelling to `out` and returns the index after the escape.
std::size_t translate_plain_escape(std::string_view p, std::size_t i, std::string& out, const std::string& what) {
  switch (p[i + 1]) {
    case 'd': out += "\\p{Nd}"; return i + 2;
    case 'D': out += "\\P{Nd}"; return i + 2;
    case 'p':
    case 'P': return copy_property(p, i, out, what);
    case 'u':
      if (i + 5 < p.size() && is_hex(p[i + 2]) && is_hex(p[i + 3]) && is_hex(p[i + 4]) && is_hex(p[i + 5])) {
        out += "\\x{";
        out.append(p.substr(i + 2, 4));
        out += '}';
        return i + 6;
      }
      break;
    default: break;
  }
  std::size_t n = 1 + escaped_char_length(p, i + 1);
  out.append(p.substr(i, n));
  return i + n;
}

std::size_t translate_class(std::string_view p, std::size_t i, std::string& out, const std::string& what) {
  ++i;
  bool negated = false;
  if (i < p.size() && p[i] == '^') {
    negated = true;
    ++i;
  }
  std::string items;
  std::vector<std::string> complements;
  bool first = true;
  while (true) {
    if (i >= p.size()) throw_invalid(what + ": unterminated character class");
    char c = p[i];
    if (c == ']' && !first) {
      ++i;
      break;
    }
    first = false;
    if (c == ']') {  // a leading ']' is literal
      items += "\\]";
      ++i;
      continue;
    }
    if (c == '[') {
      if (i + 1 < p.size() && p[i + 1] == ':') {  // POSIX bracket [:alpha:]
        std::size_t close = p.find(":]", i + 2);
        if (close == std::string_view::npos) throw_invalid(what + ": unterminated POSIX class");
        items.append(p.substr(i, close + 2 - i));
        i = close + 2;
        continue;
      }
      throw_invalid(what + ": nested character classes are not supported");
    }
    if (c == '&' && i + 1 < p.size() && p[i + 1] == '&') {
      throw_invalid(what + ": character class intersection (&&) is not supported");
    }
    if (c != '\\') {
      std::size_t n = utf8::sequence_length(static_cast<unsigned char>(c));
      items.append(p.substr(i, n));
      i += n;
      continue;
    }
    if (i + 1 >= p.size()) throw_invalid(what + ": pattern ends with a backslash");
    char e = p[i + 1];
    switch (e) {
      case 's': items += kSpaceSet; i += 2; break;
      case 'S': complements.emplace_back(kSpaceSet); i += 2; break;
      case 'w': items += kWordSet; i += 2; break;
      case 'W': complements.emplace_back(kWordSet); i += 2; break;
      case 'h': items += kHexSet; i += 2; break;
      case 'H': complements.emplace_back(kHexSet); i += 2; break;
      default: i = translate_plain_escape(p, i, items, what);
    }
  }
  if (complements.empty()) {
    out += negated ? "[^" : "[";
    out += items;
    out += ']';
  } else if (!negated) {
    // c in items  OR  c not in C1  OR  c not in C2 ...
    out += "(?:";
    bool need_bar = false;
    if (!items.empty()) {
      out += "[" + items + "]";
      need_bar = true;
    }
    for (const auto& set : complements) {
      if (need_bar) out += '|';
      out += "[^" + set + "]";
      need_bar = true;
    }
    out += ')';
  } else {
    // c not in items  AND  c in C1  AND  c in C2 ...
    out += "(?:";
    if (!items.empty()) out += "(?![" + items + "])";
    for (std::size_t k = 1; k < complements.size(); ++k) out += "(?=[" + complements[k] + "])";
    out += "[" + complements[0] + "])";
  }
  return i;
}

}  // namespace

std::string translate_oniguruma(std::string_view p, const std::string& what) {
  std::string out;
  out.reserve(p.size() * 2);
  std::size_t i = 0;
  while (i < p.size()) {
    char c = p[i];
    if (c == '[') {
      i = translate_class(p, i, out, what);
      continue;
    }
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 >= p.size()) throw_invalid(what + ": pattern ends with a backslash");
    char e = p[i + 1];
    switch (e) {
      case 's': out += std::string("[") + kSpaceSet + "]"; i += 2; break;
      case 'S': out += std::string("[^") + kSpaceSet + "]"; i += 2; break;
      case 'w': out += std::string("[") + kWordSet + "]"; i += 2; break;
      case 'W': out += std::string("[^") + kWordSet + "]"; i += 2; break;
      case 'h': out += std::string("[") + kHexSet + "]"; i += 2; break;
      case 'H': out += std::string("[^") + kHexSet + "]"; i += 2; break;
      default: i = translate_plain_escape(p, i, out, what);
    }
  }
  return out;
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() {
    if (code) pcre2_code_free(code);
  }
};

namespace {

// One match block per thread, shared by every Regex: we only read the overall
// match, so a single ovector pair suffices (PCRE2 then returns 0 instead of
// the group count, which is fine).
struct MatchData {
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  ~MatchData() { pcre2_match_data_free(md); }
};

pcre2_match_data* thread_match_data() {
  thread_local MatchData data;
  return data.md;
}

}  // namespace

Regex::Regex(std::string_view pattern, const std::string& what) : code_(std::make_unique<Code>()), what_(what) {
  if (!utf8::is_valid(pattern)) throw_invalid(what + ": pattern is not valid UTF-8");
  translated_ = translate_oniguruma(pattern, what);
  int err = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated_.data()), translated_.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &offset, nullptr);
  if (!code_->code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    throw_invalid(what + ": invalid regex /" + std::string(pattern) + "/: " + reinterpret_cast<char*>(buf) +
                  " at offset " + std::to_string(offset) + " of the translated pattern /" + translated_ + "/");
  }
  code_->jit = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

void Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  pcre2_match_data* md = thread_match_data();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const std::size_t len = text.size();
  std::size_t last_end = 0;
  bool have_last = false;
  std::size_t last_match_end = 0;
  while (last_end <= len) {
    int rc = code_->jit ? pcre2_jit_match(code_->code, subject, len, last_end, PCRE2_NO_UTF_CHECK, md, nullptr)
                        : pcre2_match(code_->code, subject, len, last_end, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(rc, buf, sizeof(buf));
      throw_invalid(what_ + ": regex match failed: " + reinterpret_cast<char*>(buf));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    std::size_t s = ov[0], e = ov[1];
    if (s == e && have_last && last_match_end == e) {
      last_end += last_end < len ? utf8::sequence_length(static_cast<unsigned char>(text[last_end])) : 1;
      continue;
    }
    last_end = e;
    last_match_end = e;
    have_last = true;
    out.emplace_back(s, e);
  }
}

Pattern Pattern::literal(std::string s) {
  Pattern p;
  p.kind_ = Kind::kLiteral;
  p.literal_ = std::move(s);
  return p;
}

Pattern Pattern::regex(std::shared_ptr<const Regex> re) {
  Pattern p;
  p.kind_ = Kind::kRegex;
  p.regex_ = std::move(re);
  return p;
}

Pattern Pattern::predicate(bool (*pred)(char32_t)) {
  Pattern p;
  p.kind_ = Kind::kPredicate;
  p.pred_ = pred;
  return p;
}

Pattern Pattern::single_char(char32_t c) {
  Pattern p;
  p.kind_ = Kind::kChar;
  p.ch_ = c;
  return p;
}

void Pattern::find_matches(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  switch (kind_) {
    case Kind::kRegex:
      regex_->find_all(text, out);
      return;
    case Kind::kLiteral: {
      // HF: an empty literal never matches; otherwise the escaped literal is
      // searched as a regex, i.e. non-overlapping occurrences left to right.
      if (literal_.empty()) return;
      std::size_t pos = 0;
      while ((pos = text.find(literal_, pos)) != std::string_view::npos) {
        out.emplace_back(pos, pos + literal_.size());
        pos += literal_.size();
      }
      return;
    }
    case Kind::kPredicate:
    case Kind::kChar: {
      std::size_t pos = 0;
      while (pos < text.size()) {
        std::size_t start = pos;
        char32_t c = utf8::decode(text, pos);
        bool hit = kind_ == Kind::kChar ? c == ch_ : pred_(c);
        if (hit) out.emplace_back(start, pos);
      }
      return;
    }
  }
}

SplitBehavior parse_split_behavior(const std::string& name, const std::string& what) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  throw_invalid(what + ": unknown split behavior '" + name +
                "' (supported: Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)");
}

void split_spans(std::string_view text, const std::vector<Span>& matches, SplitBehavior behavior, bool invert,
                 std::vector<Span>& out) {
  out.clear();
  if (text.empty()) return;
  // HF first turns the matches into a cover of the whole text: (span, is_match).
  struct Part {
    Span span;
    bool is_match;
  };
  std::vector<Part> parts;
  parts.reserve(matches.size() * 2 + 1);
  std::size_t prev = 0;
  for (const auto& m : matches) {
    if (prev != m.first) parts.push_back({{prev, m.first}, invert});
    parts.push_back({m, !invert});
    prev = m.second;
  }
  if (prev != text.size()) parts.push_back({{prev, text.size()}, invert});

  // Then merges according to the behaviour; `remove` marks pieces to drop.
  struct Piece {
    Span span;
    bool remove;
  };
  std::vector<Piece> pieces;
  pieces.reserve(parts.size());
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& p : parts) pieces.push_back({p.span, false});
      break;
    case SplitBehavior::kRemoved:
      for (const auto& p : parts) pieces.push_back({p.span, p.is_match});
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& p : parts) {
        if (p.is_match && !previous_match) {
          if (!pieces.empty()) pieces.back().span.second = p.span.second;
          else pieces.push_back({p.span, false});
        } else {
          pieces.push_back({p.span, false});
        }
        previous_match = p.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !previous_match) {
          if (!pieces.empty()) pieces.back().span.first = it->span.first;
          else pieces.push_back({it->span, false});
        } else {
          pieces.push_back({it->span, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& p : parts) {
        if (p.is_match == previous_match) {
          if (!pieces.empty()) pieces.back().span.second = p.span.second;
          else pieces.push_back({p.span, false});
        } else {
          pieces.push_back({p.span, false});
        }
        previous_match = p.is_match;
      }
      break;
    }
  }
  for (const auto& p : pieces) {
    if (!p.remove && p.span.second > p.span.first) out.push_back(p.span);
  }
}

}  // namespace hipformers::tok
