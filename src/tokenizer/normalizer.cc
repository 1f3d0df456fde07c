#include "normalizer.h"

#include <cstdlib>
#include <vector>

#include <utf8proc.h>

#include "hipformers/core/utf8.h"
#include "regex.h"
#include "unicode_props.h"

namespace hipformers::tok {
namespace {

bool is_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

// NFC / NFD / NFKC / NFKD through utf8proc. ASCII is invariant under all four.
class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(int options) : options_(options) {}
  void normalize(std::string& text) const override {
    if (text.empty() || is_ascii(text)) return;
    utf8proc_uint8_t* out = nullptr;
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                      static_cast<utf8proc_ssize_t>(text.size()), &out,
                                      static_cast<utf8proc_option_t>(options_));
    if (n < 0) throw_invalid(std::string("unicode normalization failed: ") + utf8proc_errmsg(n));
    text.assign(reinterpret_cast<char*>(out), static_cast<std::size_t>(n));
    std::free(out);
  }

 private:
  int options_;
};

// Rust char::to_lowercase per character (no final-sigma context, as HF).
class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    std::size_t pos = 0;
    while (pos < text.size()) {
      unsigned char b = static_cast<unsigned char>(text[pos]);
      if (b < 0x80) {
        out += static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b);
        ++pos;
        continue;
      }
      char32_t c = utf8::decode(text, pos);
      if (c == 0x130) {  // İ lowercases to two characters in Unicode's full mapping
        out += "i\xCC\x87";
        continue;
      }
      utf8::append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
    text.swap(out);
  }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    std::size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        std::size_t p = begin;
        if (!is_whitespace(utf8::decode(text, p))) break;
        begin = p;
      }
    }
    if (right_) {
      while (end > begin) {
        std::size_t start;
        if (!is_whitespace(last_code_point(std::string_view(text).substr(0, end), &start))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override {
    std::vector<Span> matches;
    pattern_.find_matches(text, matches);
    if (matches.empty()) return;
    std::string out;
    std::size_t prev = 0;
    for (const auto& m : matches) {
      out.append(text, prev, m.first - prev);
      out += content_;
      prev = m.second;
    }
    out.append(text, prev, std::string::npos);
    text.swap(out);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& n : parts_) n->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

// Shared with pre-tokenizers and decoders: {"String": s} or {"Regex": r}.
Pattern make_pattern(const JsonField& field) {
  if (auto s = field.get("String")) return Pattern::literal(s->str());
  if (auto r = field.get("Regex")) return Pattern::regex(std::make_shared<Regex>(r->str(), r->source() + ": " + r->path()));
  field.fail("expected {\"String\": ...} or {\"Regex\": ...}");
}

std::unique_ptr<Normalizer> make_normalizer(const JsonField& field) {
  NestingGuard guard(field);
  if (field.is_null()) return nullptr;
  const std::string type = field.type_name();
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Strip") return std::make_unique<StripNormalizer>(field.bool_or("strip_left", true), field.bool_or("strip_right", true));
  if (type == "Replace") return std::make_unique<ReplaceNormalizer>(make_pattern(field.at("pattern")), field.at("content").str());
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(field.at("prepend").str());
  if (type == "Sequence") {
    JsonField list = field.at("normalizers");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (std::size_t i = 0; i < list.array().size(); ++i) {
      auto n = make_normalizer(list.index(i));
      if (n) parts.push_back(std::move(n));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  field.at("type").fail("unsupported normalizer type '" + type +
                        "' (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace, Prepend, Sequence)");
}

}  // namespace hipformers::tok
