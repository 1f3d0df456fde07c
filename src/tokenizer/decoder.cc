#include "decoder.h"

#include "byte_level.h"
#include "hipformers/core/utf8.h"
#include "normalizer.h"
#include "regex.h"

namespace hipformers::tok {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty() || s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  std::size_t prev = 0, pos;
  while ((pos = s.find(from, prev)) != std::string::npos) {
    out.append(s, prev, pos - prev);
    out.append(to);
    prev = pos + from.size();
  }
  out.append(s, prev, std::string::npos);
  s.swap(out);
}

std::string clean_up_tokenization(std::string text) {
  replace_all(text, " .", ".");
  replace_all(text, " ?", "?");
  replace_all(text, " !", "!");
  replace_all(text, " ,", ",");
  replace_all(text, " ' ", "'");
  replace_all(text, " n't", "n't");
  replace_all(text, " 'm", "'m");
  replace_all(text, " 's", "'s");
  replace_all(text, " 've", "'ve");
  replace_all(text, " 're", "'re");
  return text;
}

namespace {

std::vector<char32_t> to_chars(std::string_view s) {
  std::vector<char32_t> out;
  std::size_t pos = 0;
  while (pos < s.size()) out.push_back(utf8::decode(s, pos));
  return out;
}

// Byte-level tokens -> bytes -> text (invalid UTF-8 becomes U+FFFD, as Rust's
// from_utf8_lossy). A token with a character outside the byte alphabet (an
// added token like "<|im_start|>" never has one, but user tokens might)
// contributes its own UTF-8 bytes.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    const auto& alphabet = ByteLevelAlphabet::get();
    std::string bytes;
    for (const auto& t : tokens) {
      std::size_t mark = bytes.size();
      std::size_t pos = 0;
      bool ok = true;
      while (pos < t.size()) {
        int b = alphabet.decode(utf8::decode(t, pos));
        if (b < 0) {
          ok = false;
          break;
        }
        bytes += static_cast<char>(b);
      }
      if (!ok) {
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8::from_bytes_lossy(bytes));
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<Span> matches;
    for (auto& t : tokens) {
      pattern_.find_matches(t, matches);
      if (matches.empty()) continue;
      std::string out;
      std::size_t prev = 0;
      for (const auto& m : matches) {
        out.append(t, prev, m.first - prev);
        out += content_;
        prev = m.second;
      }
      out.append(t, prev, std::string::npos);
      t.swap(out);
    }
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// Runs of <0xNN> tokens become the text they encode; an invalid run becomes
// one U+FFFD per byte (HF ByteFallback).
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (utf8::is_valid(pending)) {
        out.push_back(pending);
      } else {
        for (std::size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (auto& t : tokens) {
      int byte = parse_byte(t);
      if (byte >= 0) {
        pending += static_cast<char>(byte);
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }

 private:
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int parse_byte(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    int h = hex(t[3]), l = hex(t[4]);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, std::size_t start, std::size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      auto chars = to_chars(t);
      std::size_t start_cut = 0;
      for (std::size_t i = 0; i < chars.size() && i < start_ && chars[i] == content_; ++i) start_cut = i + 1;
      std::size_t stop_cut = chars.size();
      for (std::size_t i = 0; i < chars.size() && i < stop_ && chars[chars.size() - 1 - i] == content_; ++i)
        stop_cut = chars.size() - i - 1;
      std::string out;
      for (std::size_t i = start_cut; i < stop_cut; ++i) utf8::append(out, chars[i]);
      t.swap(out);
    }
  }

 private:
  char32_t content_;
  std::size_t start_, stop_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool strip_first) : replacement_(replacement), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      std::size_t pos = 0;
      const std::string& t = tokens[i];
      while (pos < t.size()) {
        std::size_t start = pos;
        char32_t c = utf8::decode(t, pos);
        if (c == replacement_) {
          if (!(i == 0 && strip_first_)) out += ' ';
        } else {
          out.append(t, start, pos - start);
        }
      }
      tokens[i].swap(out);
    }
  }

 private:
  char32_t replacement_;
  bool strip_first_;
};

std::string wordpiece_cleanup(std::string s) {
  replace_all(s, " .", ".");
  replace_all(s, " ?", "?");
  replace_all(s, " !", "!");
  replace_all(s, " ,", ",");
  replace_all(s, " ' ", "'");
  replace_all(s, " n't", "n't");
  replace_all(s, " 'm", "'m");
  replace_all(s, " do not", " don't");
  replace_all(s, " 's", "'s");
  replace_all(s, " 've", "'ve");
  replace_all(s, " 're", "'re");
  return s;
}

class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      auto& t = tokens[i];
      if (i != 0) {
        if (!prefix_.empty() && t.compare(0, prefix_.size(), prefix_) == 0) t.erase(0, prefix_.size());
        else if (prefix_.empty()) { /* replacen("", "", 1) leaves the token as is */ }
        else t.insert(0, " ");
      }
      if (cleanup_) t = wordpiece_cleanup(std::move(t));
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : parts_) d->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

char32_t one_char(const JsonField& f) {
  std::string s = f.str();
  if (s.empty() || !utf8::is_valid(s) || utf8::count_code_points(s) != 1) f.fail("expected a single character");
  std::size_t pos = 0;
  return utf8::decode(s, pos);
}

std::size_t count_field(const JsonField& f, const char* key) {
  auto v = f.get(key);
  if (!v) return 0;
  std::int64_t n = v->integer();
  if (n < 0) v->fail("expected a non-negative integer");
  return static_cast<std::size_t>(n);
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const JsonField& field) {
  NestingGuard guard(field);
  if (field.is_null()) return nullptr;
  const std::string type = field.type_name();
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace") return std::make_unique<ReplaceDecoder>(make_pattern(field.at("pattern")), field.at("content").str());
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(one_char(field.at("content")), count_field(field, "start"), count_field(field, "stop"));
  }
  if (type == "Metaspace") {
    char32_t replacement = one_char(field.at("replacement"));
    bool strip_first = true;
    if (auto ps = field.get("prepend_scheme")) {
      std::string s = ps->str();
      if (s != "always" && s != "first" && s != "never") ps->fail("unknown prepend_scheme '" + s + "' (supported: always, first, never)");
      strip_first = s != "never";
    } else if (field.has("add_prefix_space")) {
      strip_first = field.at("add_prefix_space").boolean();
    }
    return std::make_unique<MetaspaceDecoder>(replacement, strip_first);
  }
  if (type == "WordPiece") return std::make_unique<WordPieceDecoder>(field.str_or("prefix", "##"), field.bool_or("cleanup", true));
  if (type == "BPEDecoder") return std::make_unique<BpeDecoder>(field.str_or("suffix", "</w>"));
  if (type == "Sequence") {
    JsonField list = field.at("decoders");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (std::size_t i = 0; i < list.array().size(); ++i) {
      auto d = make_decoder(list.index(i));
      if (d) parts.push_back(std::move(d));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  field.at("type").fail("unsupported decoder type '" + type +
                        "' (supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, WordPiece, "
                        "BPEDecoder, Sequence)");
}

}  // namespace hipformers::tok
