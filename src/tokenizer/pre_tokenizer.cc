#include "pre_tokenizer.h"

#include "byte_level.h"
#include "hipformers/core/utf8.h"
#include "normalizer.h"
#include "regex.h"
#include "unicode_props.h"

namespace hipformers::tok {
namespace {

// Splits every piece with `pattern`/`behavior` (HF PreTokenizedString::split
// + NormalizedString::split).
void split_all(std::vector<Piece>& pieces, const Pattern& pattern, SplitBehavior behavior, bool invert) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 4);
  std::vector<Span> matches, spans;
  for (auto& piece : pieces) {
    pattern.find_matches(piece.text, matches);
    split_spans(piece.text, matches, behavior, invert, spans);
    if (spans.size() == 1 && spans[0].first == 0 && spans[0].second == piece.text.size()) {
      out.push_back(std::move(piece));
      continue;
    }
    for (const auto& s : spans) {
      out.push_back(Piece{piece.text.substr(s.first, s.second - s.first), piece.at_start && s.first == 0});
    }
  }
  pieces.swap(out);
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override { split_all(pieces, pattern_, behavior_, invert_); }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// GPT-2's pre-tokenization regex, as HF ByteLevel(use_regex=true) compiles it.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = Pattern::regex(std::make_shared<Regex>(kGpt2Pattern, "ByteLevel pre-tokenizer regex")), has_regex_ = true;
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_) {
      for (auto& p : pieces)
        if (p.text.empty() || p.text[0] != ' ') p.text.insert(0, " ");
    }
    if (has_regex_) split_all(pieces, regex_, SplitBehavior::kIsolated, false);
    const auto& alphabet = ByteLevelAlphabet::get();
    std::string mapped;
    for (auto& p : pieces) {
      mapped.clear();
      for (unsigned char b : p.text) mapped += alphabet.encode(b);
      p.text.swap(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  bool has_regex_ = false;
  Pattern regex_ = Pattern::literal("");
};

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePreTokenizer(char32_t replacement, Prepend scheme, bool split)
      : replacement_(replacement), repl_(utf8::encode(replacement)), scheme_(scheme), split_(split) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (auto& p : pieces) {
      std::string out;
      out.reserve(p.text.size() + repl_.size());
      for (char c : p.text) {
        if (c == ' ') out += repl_;
        else out += c;
      }
      bool starts = out.compare(0, repl_.size(), repl_) == 0;
      if (!starts && (scheme_ == Prepend::kAlways || (scheme_ == Prepend::kFirst && p.at_start))) out.insert(0, repl_);
      p.text.swap(out);
    }
    if (split_) split_all(pieces, Pattern::single_char(replacement_), SplitBehavior::kMergedWithNext, false);
  }

 private:
  char32_t replacement_;
  std::string repl_;
  Prepend scheme_;
  bool split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

// A fixed list of (pattern, behaviour) splits (Whitespace, Digits, BERT, ...).
class FixedSplits final : public PreTokenizer {
 public:
  struct Step {
    Pattern pattern;
    SplitBehavior behavior;
    bool invert;
  };
  explicit FixedSplits(std::vector<Step> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& s : steps_) split_all(pieces, s.pattern, s.behavior, s.invert);
  }

 private:
  std::vector<Step> steps_;
};

char32_t single_char(const JsonField& f) {
  std::string s = f.str();
  if (s.empty() || !utf8::is_valid(s) || utf8::count_code_points(s) != 1) f.fail("expected a single character");
  std::size_t pos = 0;
  return utf8::decode(s, pos);
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonField& field) {
  NestingGuard guard(field);
  if (field.is_null()) return nullptr;
  const std::string type = field.type_name();
  if (type == "Split") {
    auto behavior = parse_split_behavior(field.at("behavior").str(), field.source() + ": " + field.path() + ".behavior");
    return std::make_unique<SplitPreTokenizer>(make_pattern(field.at("pattern")), behavior, field.bool_or("invert", false));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(field.bool_or("add_prefix_space", true), field.bool_or("use_regex", true));
  }
  if (type == "Metaspace") {
    char32_t replacement = single_char(field.at("replacement"));
    auto scheme = MetaspacePreTokenizer::Prepend::kAlways;
    if (auto ps = field.get("prepend_scheme")) {
      std::string s = ps->str();
      if (s == "always") scheme = MetaspacePreTokenizer::Prepend::kAlways;
      else if (s == "first") scheme = MetaspacePreTokenizer::Prepend::kFirst;
      else if (s == "never") scheme = MetaspacePreTokenizer::Prepend::kNever;
      else ps->fail("unknown prepend_scheme '" + s + "' (supported: always, first, never)");
    } else if (field.has("add_prefix_space")) {  // legacy files
      scheme = field.at("add_prefix_space").boolean() ? MetaspacePreTokenizer::Prepend::kAlways
                                                      : MetaspacePreTokenizer::Prepend::kNever;
    }
    return std::make_unique<MetaspacePreTokenizer>(replacement, scheme, field.bool_or("split", true));
  }
  if (type == "Sequence") {
    JsonField list = field.at("pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (std::size_t i = 0; i < list.array().size(); ++i) {
      auto p = make_pre_tokenizer(list.index(i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  std::vector<FixedSplits::Step> steps;
  if (type == "Whitespace") {
    steps.push_back({Pattern::regex(std::make_shared<Regex>("\\w+|[^\\w\\s]+", "Whitespace pre-tokenizer regex")),
                     SplitBehavior::kRemoved, true});
  } else if (type == "WhitespaceSplit") {
    steps.push_back({Pattern::predicate(is_whitespace), SplitBehavior::kRemoved, false});
  } else if (type == "Digits") {
    steps.push_back({Pattern::predicate(is_numeric),
                     field.bool_or("individual_digits", false) ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, false});
  } else if (type == "Punctuation") {
    auto behavior = SplitBehavior::kIsolated;
    if (auto b = field.get("behavior")) behavior = parse_split_behavior(b->str(), b->source() + ": " + b->path());
    steps.push_back({Pattern::predicate(is_bert_punctuation), behavior, false});
  } else if (type == "BertPreTokenizer") {
    steps.push_back({Pattern::predicate(is_whitespace), SplitBehavior::kRemoved, false});
    steps.push_back({Pattern::predicate(is_bert_punctuation), SplitBehavior::kIsolated, false});
  } else if (type == "CharDelimiterSplit") {
    steps.push_back({Pattern::single_char(single_char(field.at("delimiter"))), SplitBehavior::kRemoved, false});
  } else {
    field.at("type").fail("unsupported pre_tokenizer type '" + type +
                          "' (supported: Split, ByteLevel, Metaspace, Whitespace, WhitespaceSplit, Digits, "
                          "Punctuation, BertPreTokenizer, CharDelimiterSplit, Sequence)");
  }
  return std::make_unique<FixedSplits>(std::move(steps));
}

}  // namespace hipformers::tok
