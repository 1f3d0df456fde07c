// Regular expressions with Oniguruma meaning, run by PCRE2.
//
// HF tokenizers compiles tokenizer.json patterns with Oniguruma (Ruby syntax).
// PCRE2 (UTF + UCP, JIT) is much faster here but gives some classes a
// different meaning, so patterns are translated first: \s, \S, \d, \w, \h
// become the explicit Unicode sets Oniguruma uses (notably \s has no U+180E),
// \uHHHH becomes \x{HHHH}, and ^/$ are line anchors as in Ruby.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hipformers::tok {

using Span = std::pair<std::size_t, std::size_t>;  // [begin, end) byte offsets

// Oniguruma pattern -> equivalent PCRE2 pattern. Throws Error(`what`: ...) on
// constructs we cannot translate faithfully (class intersection, nested classes).
std::string translate_oniguruma(std::string_view pattern, const std::string& what);

class Regex {
 public:
  // Compiles an Oniguruma pattern; `what` names it in errors (file + JSON path).
  Regex(std::string_view oniguruma_pattern, const std::string& what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All matches, left to right, like the onig crate's find_iter (which HF
  // uses): an empty match is reported unless it ends where the previous match
  // ended. `text` must be valid UTF-8. Thread-safe.
  void find_all(std::string_view text, std::vector<Span>& out) const;

  const std::string& translated() const { return translated_; }

 private:
  struct Code;
  std::unique_ptr<Code> code_;
  std::string translated_;
  std::string what_;
};

// What Split-like components split on: a literal string, a regex, or a
// character predicate (each matching character is its own match).
class Pattern {
 public:
  static Pattern literal(std::string s);
  static Pattern regex(std::shared_ptr<const Regex> re);
  static Pattern predicate(bool (*pred)(char32_t));
  static Pattern single_char(char32_t c);

  // Appends the matches in `text` to `out` (cleared first).
  void find_matches(std::string_view text, std::vector<Span>& out) const;

 private:
  enum class Kind { kLiteral, kRegex, kPredicate, kChar } kind_ = Kind::kLiteral;
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
  bool (*pred_)(char32_t) = nullptr;
  char32_t ch_ = 0;
};

// HF SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Parses "Removed", "Isolated", ... ; throws naming `what` otherwise.
SplitBehavior parse_split_behavior(const std::string& name, const std::string& what);

// HF NormalizedString::split: given the matches of a pattern in `text`
// (optionally inverted), the non-empty pieces to keep, as spans of `text`.
void split_spans(std::string_view text, const std::vector<Span>& matches, SplitBehavior behavior, bool invert,
                 std::vector<Span>& out);

}  // namespace hipformers::tok
