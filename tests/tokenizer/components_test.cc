// Component tests on small hand-built tokenizer.json documents and on the
// internal regex / split machinery.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../src/tokenizer/decoder.h"
#include "../../src/tokenizer/regex.h"
#include "hipformers/core/error.h"
#include "hipformers/core/json.h"
#include "hipformers/tokenizer/tokenizer.h"

namespace hipformers {
namespace {

using Ids = std::vector<std::int32_t>;
using tok::Span;

std::vector<Span> find(const std::string& pattern, const std::string& text) {
  tok::Regex re(pattern, "test");
  std::vector<Span> out;
  re.find_all(text, out);
  return out;
}

// ---- Regex translation (Oniguruma meaning on PCRE2) -------------------------

TEST(Regex, WhitespaceClassIsOniguruma) {
  // NBSP and NEL are \s; U+180E (MONGOLIAN VOWEL SEPARATOR) is not.
  EXPECT_EQ(find("\\s", "\xC2\xA0"), (std::vector<Span>{{0, 2}}));
  EXPECT_EQ(find("\\s", "\xC2\x85"), (std::vector<Span>{{0, 2}}));
  EXPECT_EQ(find("\\s", "\x0B\x0C"), (std::vector<Span>{{0, 1}, {1, 2}}));
  EXPECT_TRUE(find("\\s", "\xE1\xA0\x8E").empty());
  EXPECT_EQ(find("\\S", "\xE1\xA0\x8E"), (std::vector<Span>{{0, 3}}));
  EXPECT_TRUE(find("\\S", "\xE3\x80\x80").empty());  // ideographic space
}

TEST(Regex, NegatedClassWithSpace) {
  // [^\s\p{L}\p{N}] must exclude exactly Oniguruma's \s.
  EXPECT_EQ(find("[^\\s\\p{L}\\p{N}]+", "a\xE1\xA0\x8E!b"), (std::vector<Span>{{1, 5}}));
  EXPECT_TRUE(find("[^\\s\\p{L}\\p{N}]+", "a\xC2\xA0" "b").empty());
}

TEST(Regex, ComplementInsideClass) {
  // [^\S\n]: whitespace other than newline.
  EXPECT_EQ(find("[^\\S\\n]+", " \t\nx \xC2\xA0"), (std::vector<Span>{{0, 2}, {4, 7}}));
  // [\Sx]: non-space or x (x is non-space anyway), spaces excluded.
  EXPECT_EQ(find("[\\S]+", "ab cd"), (std::vector<Span>{{0, 2}, {3, 5}}));
  EXPECT_EQ(find("[\\s\\S]+", "a b\n"), (std::vector<Span>{{0, 4}}));
}

TEST(Regex, DigitsWordAndUnicodeEscapes) {
  EXPECT_EQ(find("\\d+", "x\xD9\xA3" "12"), (std::vector<Span>{{1, 5}}));  // Arabic-Indic 3 is Nd
  EXPECT_TRUE(find("\\d", "\xC2\xB2").empty());                            // superscript two is No
  EXPECT_EQ(find("\\w+", "a_b\xCC\x81 c"), (std::vector<Span>{{0, 5}, {6, 7}}));
  EXPECT_EQ(find("\\u00e9", "caf\xC3\xA9"), (std::vector<Span>{{3, 5}}));
  EXPECT_EQ(find("\\p{^L}+", "ab12cd"), (std::vector<Span>{{2, 4}}));
}

TEST(Regex, CaseInsensitiveContractionsAndLookahead) {
  EXPECT_EQ(find("(?i:'s|'t)", "IT'S it't"), (std::vector<Span>{{2, 4}, {7, 9}}));
  // \s+(?!\S) leaves the last space for the next word.
  EXPECT_EQ(find("\\s+(?!\\S)|\\s+", "a   b"), (std::vector<Span>{{1, 3}, {3, 4}}));
}

TEST(Regex, EmptyMatchesFollowOnigFindIter) {
  // onig's find_iter reports an empty match unless it ends where the
  // previous match ended.
  EXPECT_EQ(find("a*", "baa"), (std::vector<Span>{{0, 0}, {1, 3}}));
  EXPECT_EQ(find("x*", ""), (std::vector<Span>{{0, 0}}));
}

TEST(Regex, InvalidPatternNamesWhereAndOffset) {
  try {
    tok::Regex re("(abc", "t.json: pre_tokenizer.pattern.Regex");
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("t.json: pre_tokenizer.pattern.Regex"), std::string::npos) << m;
    EXPECT_NE(m.find("offset"), std::string::npos) << m;
  }
  EXPECT_THROW(tok::Regex("[a&&b]", "t"), Error);
}

// ---- Split behaviours (HF docs example "the-final--countdown") ------------

std::vector<std::string> split(const std::string& text, tok::SplitBehavior b, bool invert = false) {
  std::vector<Span> matches, spans;
  tok::Pattern::literal("-").find_matches(text, matches);
  tok::split_spans(text, matches, b, invert, spans);
  std::vector<std::string> out;
  for (auto [s, e] : spans) out.push_back(text.substr(s, e - s));
  return out;
}

TEST(Split, Behaviours) {
  using B = tok::SplitBehavior;
  using V = std::vector<std::string>;
  const std::string t = "the-final--countdown";
  EXPECT_EQ(split(t, B::kRemoved), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split(t, B::kIsolated), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(t, B::kMergedWithPrevious), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(t, B::kMergedWithNext), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(t, B::kContiguous), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split(t, B::kRemoved, /*invert=*/true), (V{"-", "-", "-"}));
}

// ---- Whole tokenizers built from JSON -----------------------------------

Json char_vocab(const std::string& chars) {
  Json v = Json::object();
  int id = 0;
  std::size_t pos = 0;
  while (pos < chars.size()) {
    std::size_t n = 1;
    unsigned char c = static_cast<unsigned char>(chars[pos]);
    if (c >= 0xF0) n = 4; else if (c >= 0xE0) n = 3; else if (c >= 0xC0) n = 2;
    v[chars.substr(pos, n)] = id++;
    pos += n;
  }
  return v;
}

Json bpe(Json vocab, Json merges = Json::array()) {
  return Json{{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", std::move(merges)}, {"dropout", nullptr}};
}

Tokenizer load(const Json& doc, const std::string& config = "") {
  return Tokenizer::from_json(doc.dump(), config, "test/tokenizer.json");
}

std::string error_of(const Json& doc) {
  try {
    load(doc);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Bpe, LowestRankMergesFirst) {
  Json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}};
  EXPECT_EQ(load(Json{{"model", bpe(vocab, {"b c", "a b", "ab c"})}}).encode("abc"), (Ids{0, 4}));
  EXPECT_EQ(load(Json{{"model", bpe(vocab, {"a b", "b c", "ab c"})}}).encode("abc"), (Ids{5}));
  // Array form of merges.
  EXPECT_EQ(load(Json{{"model", bpe(vocab, Json::parse(R"([["a","b"],["ab","c"]])"))}}).encode("abc"), (Ids{5}));
  // Ties: leftmost first. "aaa" with a a -> aa: [aa, a].
  Json v2 = {{"a", 0}, {"aa", 1}};
  EXPECT_EQ(load(Json{{"model", bpe(v2, {"a a"})}}).encode("aaa"), (Ids{1, 0}));
}

TEST(Bpe, IgnoreMerges) {
  Json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 5}};
  Json m = bpe(vocab, {"a b"});
  EXPECT_EQ(load(Json{{"model", m}}).encode("abc"), (Ids{3, 2}));
  m["ignore_merges"] = true;
  EXPECT_EQ(load(Json{{"model", m}}).encode("abc"), (Ids{5}));
  EXPECT_EQ(load(Json{{"model", m}}).encode("ab"), (Ids{3}));
}

TEST(Bpe, UnknownAndFuseUnk) {
  Json m = bpe({{"<unk>", 0}, {"a", 1}});
  m["unk_token"] = "<unk>";
  EXPECT_EQ(load(Json{{"model", m}}).encode("axxa"), (Ids{1, 0, 0, 1}));
  m["fuse_unk"] = true;
  EXPECT_EQ(load(Json{{"model", m}}).encode("axxa"), (Ids{1, 0, 1}));
  // Without unk_token unknown characters vanish.
  EXPECT_EQ(load(Json{{"model", bpe({{"a", 1}})}}).encode("axa"), (Ids{1, 1}));
}

TEST(Bpe, ByteFallback) {
  Json m = bpe({{"<unk>", 0}, {"a", 1}, {"<0xC3>", 2}, {"<0xA9>", 3}});
  m["unk_token"] = "<unk>";
  m["byte_fallback"] = true;
  Json doc = {{"model", m},
              {"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}}};
  auto t = load(doc);
  EXPECT_EQ(t.encode("a\xC3\xA9"), (Ids{1, 2, 3}));
  EXPECT_EQ(t.encode("\xC3\xA8"), (Ids{0}));  // <0xA8> missing -> unk
  EXPECT_EQ(t.decode(Ids{1, 2, 3}), "a\xC3\xA9");
  EXPECT_EQ(t.decode(Ids{2, 1}), "\xEF\xBF\xBD" "a");  // lone lead byte -> one U+FFFD per byte
}

TEST(Bpe, SubwordPrefixAndSuffix) {
  Json m = bpe({{"a", 0}, {"##b", 1}, {"##c</w>", 2}, {"ab", 3}}, {"a ##b"});
  m["continuing_subword_prefix"] = "##";
  m["end_of_word_suffix"] = "</w>";
  EXPECT_EQ(load(Json{{"model", m}}).encode("abc"), (Ids{3, 2}));
}

TEST(Bpe, DropoutIsRejected) {
  Json m = bpe({{"a", 0}});
  m["dropout"] = 0.1;
  EXPECT_NE(error_of(Json{{"model", m}}).find("dropout"), std::string::npos);
  m["dropout"] = 0.0;
  EXPECT_NO_THROW(load(Json{{"model", m}}));
}

Json letters_model() { return bpe(char_vocab("abcdefghijklmnopqrstuvwxyz .<>")); }

Json added(const std::string& content, int id, bool special, Json flags = Json::object()) {
  Json t = {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
            {"normalized", false}, {"special", special}};
  for (auto& [k, v] : flags.items()) t[k] = v;
  return t;
}

TEST(AddedTokens, LeftmostLongest) {
  Json doc = {{"model", letters_model()},
              {"added_tokens", {added("<x>", 100, true), added("<x><y>", 101, true), added("x>", 102, false)}}};
  auto t = load(doc);
  EXPECT_EQ(t.encode("a<x><y>b"), (Ids{0, 101, 1}));
  EXPECT_EQ(t.encode("<x>x>"), (Ids{100, 102}));
  EXPECT_EQ(t.decode(Ids{0, 101, 1}, true), "a b");  // no decoder: tokens joined by spaces
  EXPECT_EQ(t.decode(Ids{0, 102, 1}, true), "a x> b");
}

TEST(AddedTokens, LstripRstrip) {
  const int sp = 26;  // ' ' in letters_model
  auto with = [&](bool l, bool r) {
    return load(Json{{"model", letters_model()}, {"added_tokens", {added("<m>", 100, true, {{"lstrip", l}, {"rstrip", r}})}}});
  };
  EXPECT_EQ(with(false, false).encode("a <m> b"), (Ids{0, sp, 100, sp, 1}));
  EXPECT_EQ(with(true, false).encode("a  <m> b"), (Ids{0, 100, sp, 1}));
  EXPECT_EQ(with(false, true).encode("a <m>  b"), (Ids{0, sp, 100, 1}));
  EXPECT_EQ(with(true, true).encode("a\t<m>\n b"), (Ids{0, 100, 1}));
}

TEST(AddedTokens, SingleWord) {
  auto t = load(Json{{"model", letters_model()}, {"added_tokens", {added("cat", 100, false, {{"single_word", true}})}}});
  Ids ids = t.encode("cat concat cat.");
  EXPECT_EQ(ids.front(), 100);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 100), 2);
  EXPECT_EQ(ids[ids.size() - 2], 100);
}

TEST(AddedTokens, NormalizedTokensMatchNormalizedText) {
  Json doc = {{"model", letters_model()},
              {"normalizer", {{"type", "Lowercase"}}},
              {"added_tokens", {added("hello", 100, false, {{"normalized", true}}), added("WORLD", 101, false)}}};
  auto t = load(doc);
  EXPECT_EQ(t.encode("HeLLo WORLD world"), (Ids{100, 26, 101, 26, 22, 14, 17, 11, 3}));
}

TEST(Normalizers, Various) {
  auto enc = [](Json normalizer, const std::string& text) {
    Json doc = {{"model", bpe(char_vocab("abcxyz_ \xC3\xA9" "e\xCC\x81" "1"))}, {"normalizer", normalizer}};
    return load(doc).decode(load(doc).encode(text));  // no decoder: chars joined by ' '
  };
  EXPECT_EQ(enc({{"type", "Lowercase"}}, "ABC"), "a b c");
  EXPECT_EQ(enc({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, " \t ab \xC2\xA0"), "a b");
  EXPECT_EQ(enc({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "_"}}, "a b"), "a _ b");
  EXPECT_EQ(enc({{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", "x"}}, "a \t b"), "a x b");
  EXPECT_EQ(enc({{"type", "Prepend"}, {"prepend", "z"}}, "ab"), "z a b");
  EXPECT_EQ(enc({{"type", "NFC"}}, "e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(enc({{"type", "NFD"}}, "\xC3\xA9"), "e \xCC\x81");
  EXPECT_EQ(enc({{"type", "NFKC"}}, "\xC2\xB9"), "1");  // superscript one
  EXPECT_EQ(enc({{"type", "Sequence"}, {"normalizers", {{{"type", "Lowercase"}}, {{"type", "Prepend"}, {"prepend", "_"}}}}}, "AB"),
            "_ a b");
  EXPECT_NE(error_of(Json{{"model", letters_model()}, {"normalizer", {{"type", "Precompiled"}}}}).find("supported: NFC"),
            std::string::npos);
}

TEST(PreTokenizers, MetaspaceAndLlama2StyleDecoder) {
  const std::string m = "\xE2\x96\x81";  // ▁
  Json vocab = {{m, 0}, {"a", 1}, {"b", 2}, {m + "a", 3}, {m + "b", 4}};
  Json decoder = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", m}}}, {"content", " "}},
                    {{"type", "ByteFallback"}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  auto make = [&](const std::string& scheme) {
    return load(Json{{"model", bpe(vocab, {m + " a", m + " b"})},
                     {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", scheme}, {"split", true}}},
                     {"decoder", decoder}});
  };
  EXPECT_EQ(make("always").encode("a b"), (Ids{3, 4}));
  EXPECT_EQ(make("first").encode("a b"), (Ids{3, 4}));
  EXPECT_EQ(make("never").encode("a b"), (Ids{1, 4}));
  EXPECT_EQ(make("always").decode(Ids{3, 4}), "a b");
  // Metaspace decoder: the first token's replacement is dropped.
  auto md = load(Json{{"model", bpe(vocab, {m + " a", m + " b"})},
                      {"decoder", {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}, {"split", true}}}});
  EXPECT_EQ(md.decode(Ids{3, 4}), "a b");
}

TEST(PreTokenizers, SplitDigitsWhitespacePunctuation) {
  auto pieces = [](Json pre, const std::string& text) {
    auto t = load(Json{{"model", bpe(char_vocab("abc12 !,"))}, {"pre_tokenizer", pre}, {"decoder", nullptr}});
    (void)t;
    return t.encode(text).size();
  };
  // Char-level vocab: the id count is the character count minus removed ones.
  EXPECT_EQ(pieces({{"type", "WhitespaceSplit"}}, "ab  c"), 3u);
  EXPECT_EQ(pieces({{"type", "Whitespace"}}, "ab, c!"), 5u);
  EXPECT_EQ(pieces({{"type", "Digits"}, {"individual_digits", true}}, "a12"), 3u);
  EXPECT_EQ(pieces({{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}, {"invert", false}}, "a b c"),
            3u);
  EXPECT_NE(error_of(Json{{"model", letters_model()}, {"pre_tokenizer", {{"type", "UnicodeScripts"}}}}).find("supported"),
            std::string::npos);
}

TEST(PostProcessors, TemplateProcessing) {
  Json tp = Json::parse(R"({"type":"TemplateProcessing",
    "single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"</s>","type_id":0}}],
    "pair":[], "special_tokens":{"<s>":{"id":"<s>","ids":[50],"tokens":["<s>"]},"</s>":{"id":"</s>","ids":[51],"tokens":["</s>"]}}})");
  auto t = load(Json{{"model", letters_model()}, {"post_processor", tp},
                     {"added_tokens", {added("<s>", 50, true), added("</s>", 51, true)}}});
  EXPECT_EQ(t.encode("ab"), (Ids{50, 0, 1, 51}));
  EXPECT_EQ(t.encode("ab", false), (Ids{0, 1}));
  EXPECT_EQ(t.encode(""), (Ids{50, 51}));
  EXPECT_EQ(t.decode(Ids{50, 0, 1, 51}, true), "a b");
  auto bert = load(Json{{"model", letters_model()},
                        {"post_processor", {{"type", "BertProcessing"}, {"cls", {"[CLS]", 7}}, {"sep", {"[SEP]", 8}}}}});
  EXPECT_EQ(bert.encode("a"), (Ids{7, 0, 8}));
}

TEST(Decoders, ByteLevelLossyAndCleanUp) {
  EXPECT_EQ(tok::clean_up_tokenization("Hello , world . I 'm here , aren 't we ? yes ! it 's ' quoted ' we 've they 're"),
            "Hello, world. I'm here, aren 't we? yes! it's'quoted'we've they're");
  EXPECT_EQ(tok::clean_up_tokenization("do n't"), "don't");
  auto t = load(Json{{"model", letters_model()}}, R"({"clean_up_tokenization_spaces": true})");
  EXPECT_EQ(t.decode(Ids{0, 27, 1}), "a . b");               // no decoder: tokens joined by ' '
  EXPECT_EQ(t.decode(Ids{0, 27, 1}, false, true), "a. b");  // then " ." -> "."

  // ByteLevel decoder: chars -> bytes, from_utf8_lossy; a token with a char
  // outside the byte alphabet contributes its own UTF-8.
  auto bl = load(Json{{"model", bpe({{"\xC3\x83", 0}, {"\xC2\xA9", 1}, {"\xE2\x82\xAC", 2}, {"a", 3}})},
                      {"decoder", {{"type", "ByteLevel"}}}});
  EXPECT_EQ(bl.decode(Ids{0, 1}), "\xC3\xA9");               // "Ã©" -> bytes C3 A9 -> "é"
  EXPECT_EQ(bl.decode(Ids{0, 3}), "\xEF\xBF\xBD" "a");       // lone C3 -> U+FFFD
  EXPECT_EQ(bl.decode(Ids{0, 2}), "\xEF\xBF\xBD\xE2\x82\xAC");  // "€" kept as UTF-8
}

TEST(Errors, NameFileAndPath) {
  EXPECT_NE(error_of(Json::parse("[]")).find("test/tokenizer.json"), std::string::npos);
  EXPECT_NE(error_of(Json::object()).find("model: missing required field"), std::string::npos);
  EXPECT_NE(error_of(Json{{"model", bpe({{"a", 0}}, {"a a", "a"})}}).find("model.merges[0]"), std::string::npos);
  EXPECT_NE(error_of(Json{{"model", bpe({{"a", 0}, {"aa", 1}}, {"a a", "a"})}}).find("model.merges[1]"), std::string::npos);
  EXPECT_NE(error_of(Json{{"model", bpe({{"a", 0}}, {"a b"})}}).find("not in the vocabulary"), std::string::npos);
  EXPECT_NE(error_of(Json{{"model", bpe({{"a", "x"}})}}).find("model.vocab"), std::string::npos);
  EXPECT_NE(error_of(Json{{"model", {{"type", "Unigram"}, {"vocab", Json::array()}}}}).find("supported: BPE"),
            std::string::npos);
  std::string re = error_of(Json{{"model", letters_model()},
                                 {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "a(b"}}}, {"behavior", "Isolated"}}}});
  EXPECT_NE(re.find("pre_tokenizer.pattern.Regex"), std::string::npos) << re;
  EXPECT_NE(re.find("offset"), std::string::npos) << re;
  EXPECT_THROW(Tokenizer::from_json("{not json", "", "x.json"), Error);
  EXPECT_THROW(Tokenizer::from_pretrained("/nonexistent/dir"), Error);
  std::string cfg;
  try {
    load(Json{{"model", letters_model()}}, R"({"bos_token": 5})");
  } catch (const Error& e) {
    cfg = e.what();
  }
  EXPECT_NE(cfg.find("tokenizer_config.json: bos_token"), std::string::npos) << cfg;
}

TEST(Config, ChatTemplatesAndTokens) {
  auto t = load(Json{{"model", letters_model()}, {"added_tokens", {added("<s>", 50, false)}}},
                R"({"bos_token": {"content": "<s>", "lstrip": false}, "chat_template": [{"name": "default", "template": "D"},
                    {"name": "tool_use", "template": "T"}], "model_max_length": 1e30, "add_bos_token": true})");
  EXPECT_EQ(t.config().bos_token, "<s>");
  EXPECT_EQ(t.config().chat_template, "D");
  EXPECT_EQ(t.config().named_chat_templates.at("tool_use"), "T");
  EXPECT_EQ(t.config().model_max_length, INT64_MAX);
  EXPECT_TRUE(t.is_special(50));  // named by the config
  EXPECT_EQ(t.bos_token_id(), 50);
  EXPECT_EQ(t.encode("a"), (Ids{0}));  // add_bos_token ignored for non-Llama classes
  auto llama = load(Json{{"model", letters_model()}, {"added_tokens", {added("<s>", 50, true)}}},
                    R"({"bos_token": "<s>", "tokenizer_class": "LlamaTokenizerFast"})");
  EXPECT_EQ(llama.encode("a"), (Ids{50, 0}));
  EXPECT_EQ(llama.encode("a", false), (Ids{0}));
}

}  // namespace
}  // namespace hipformers
