#include "hipformers/tokenizer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "added_vocabulary.h"
#include "bpe.h"
#include "decoder.h"
#include "hipformers/core/error.h"
#include "hipformers/core/file.h"
#include "hipformers/core/json.h"
#include "hipformers/core/utf8.h"
#include "json_fields.h"
#include "normalizer.h"
#include "post_processor.h"
#include "pre_tokenizer.h"
#include "regex.h"
#include "string_map.h"

namespace hipformers {

using tok::JsonField;

// ---------------------------------------------------------------------------
// tokenizer_config.json

namespace {

// Special tokens appear as "tok", {"content": "tok", ...} (AddedToken), or null.
std::optional<std::string> special_token_value(const OrderedJson& v, const std::string& where) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    auto it = v.find("content");
    if (it != v.end() && it->is_string()) return it->get<std::string>();
  }
  throw_invalid(where + ": expected a string or an object with a \"content\" string");
}

}  // namespace

nlohmann::ordered_json TokenizerConfig::chat_template_special_tokens() const {
  nlohmann::ordered_json special = nlohmann::ordered_json::object();
  auto put = [&](const char* key, const std::optional<std::string>& value) {
    if (value) special[key] = *value;
  };
  put("bos_token", bos_token);
  put("eos_token", eos_token);
  put("unk_token", unk_token);
  put("pad_token", pad_token);
  if (!additional_special_tokens.empty()) special["additional_special_tokens"] = additional_special_tokens;
  return special;
}

TokenizerConfig TokenizerConfig::parse(std::string_view json_text, const std::string& source) {
  TokenizerConfig c;
  c.raw = parse_ordered_json(json_text, source);
  const OrderedJson& r = c.raw;
  if (!r.is_object()) throw_invalid(source + ": expected a JSON object at the top level");
  auto token = [&](const char* key, std::optional<std::string>& out) {
    if (auto it = r.find(key); it != r.end()) out = special_token_value(*it, source + ": " + key);
  };
  token("bos_token", c.bos_token);
  token("eos_token", c.eos_token);
  token("unk_token", c.unk_token);
  token("pad_token", c.pad_token);
  if (auto it = r.find("additional_special_tokens"); it != r.end() && !it->is_null()) {
    if (!it->is_array()) throw_invalid(source + ": additional_special_tokens: expected an array");
    for (std::size_t i = 0; i < it->size(); ++i) {
      auto v = special_token_value((*it)[i], source + ": additional_special_tokens[" + std::to_string(i) + "]");
      if (v) c.additional_special_tokens.push_back(*v);
    }
  }
  auto boolean = [&](const char* key, bool& out) {
    if (auto it = r.find(key); it != r.end() && !it->is_null()) {
      if (!it->is_boolean()) throw_invalid(source + ": " + key + ": expected a boolean");
      out = it->get<bool>();
    }
  };
  if (auto it = r.find("tokenizer_class"); it != r.end() && it->is_string()) c.tokenizer_class = it->get<std::string>();
  // Transformers' Llama/Gemma fast tokenizers default add_bos_token to true.
  const bool llama_like = c.tokenizer_class.rfind("LlamaTokenizer", 0) == 0 ||
                          c.tokenizer_class.rfind("CodeLlamaTokenizer", 0) == 0 ||
                          c.tokenizer_class.rfind("GemmaTokenizer", 0) == 0;
  c.add_bos_token = llama_like;
  boolean("add_bos_token", c.add_bos_token);
  boolean("add_eos_token", c.add_eos_token);
  boolean("clean_up_tokenization_spaces", c.clean_up_tokenization_spaces);
  if (auto it = r.find("chat_template"); it != r.end() && !it->is_null()) {
    if (it->is_string()) {
      c.chat_template = it->get<std::string>();
    } else if (it->is_array()) {
      for (std::size_t i = 0; i < it->size(); ++i) {
        const auto& e = (*it)[i];
        const std::string where = source + ": chat_template[" + std::to_string(i) + "]";
        if (!e.is_object() || !e.contains("name") || !e.contains("template") || !e["name"].is_string() ||
            !e["template"].is_string())
          throw_invalid(where + ": expected {\"name\": string, \"template\": string}");
        c.named_chat_templates[e["name"].get<std::string>()] = e["template"].get<std::string>();
      }
      if (auto d = c.named_chat_templates.find("default"); d != c.named_chat_templates.end()) c.chat_template = d->second;
    } else {
      throw_invalid(source + ": chat_template: expected a string or a list of {name, template}");
    }
  }
  if (auto it = r.find("model_max_length"); it != r.end() && !it->is_null()) {
    if (it->is_number_integer()) {
      c.model_max_length = std::max<std::int64_t>(0, it->get<std::int64_t>());
    } else if (it->is_number_unsigned()) {
      auto u = it->get<std::uint64_t>();
      c.model_max_length = u > static_cast<std::uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(u);
    } else if (it->is_number_float()) {
      double d = it->get<double>();
      if (!(d > 0)) c.model_max_length = 0;
      else if (d >= 9.2e18) c.model_max_length = INT64_MAX;
      else c.model_max_length = static_cast<std::int64_t>(d);
    } else {
      throw_invalid(source + ": model_max_length: expected a number");
    }
  }
  return c;
}

// ---------------------------------------------------------------------------
// Tokenizer

struct Tokenizer::Impl {
  std::string source;
  TokenizerConfig config;
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::BpeModel> model;
  std::unique_ptr<tok::PostProcessor> post_processor;
  std::unique_ptr<tok::Decoder> decoder;
  tok::AddedVocabulary added;
  tok::StringMap<std::int32_t> added_by_content;
  std::vector<std::int32_t> added_index_by_id;  // id -> index in added.tokens(), -1 if none
  std::vector<bool> special;                     // id -> special
  std::int32_t vocab_size = 0;
  // Fast path for the usual byte-level BPE setup (GPT-2, Llama 3, Qwen):
  // pre_tokenizer = ByteLevel(add_prefix_space=false) or
  // Sequence[Split(Regex, Isolated), ByteLevel(add_prefix_space=false,
  // use_regex=false)]. Words are then cut straight out of the text and looked
  // up by raw bytes, with no intermediate strings. Same result as the generic path.
  bool byte_level_fast = false;
  std::shared_ptr<const tok::Regex> fast_split;  // null: the whole piece is one word

  void encode_text(std::string text, bool at_start, std::vector<std::int32_t>& ids) const;
  std::optional<std::int32_t> lookup(std::string_view token) const {
    if (auto it = added_by_content.find(token); it != added_by_content.end()) return it->second;
    return model->token_to_id(token);
  }
};

namespace {

std::unique_ptr<tok::BpeModel> make_model(const JsonField& field) {
  std::string type;
  if (field.has("type")) type = field.type_name();
  else if (field.has("merges")) type = "BPE";  // older files omit the type
  if (type != "BPE") {
    if (field.has("type")) field.at("type").fail("unsupported model type '" + type + "' (supported: BPE)");
    field.fail("model has no \"type\" (supported: BPE)");
  }
  return std::make_unique<tok::BpeModel>(field);
}

constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Lenient typed reads for the fast-path probe (the generic constructors
// report malformed fields).
std::string str_member(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool bool_member(const Json& j, const char* key, bool def) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : def;
}

bool is_plain_byte_level(const Json& j, bool want_regex) {
  return j.is_object() && str_member(j, "type") == "ByteLevel" && !bool_member(j, "add_prefix_space", true) &&
         bool_member(j, "use_regex", true) == want_regex;
}

void detect_byte_level_fast_path(const JsonField& pre, Tokenizer::Impl& impl) {
  const Json& j = pre.json();
  if (is_plain_byte_level(j, true)) {
    impl.fast_split = std::make_shared<tok::Regex>(kGpt2Pattern, "ByteLevel pre-tokenizer regex");
    impl.byte_level_fast = true;
    return;
  }
  if (is_plain_byte_level(j, false)) {
    impl.byte_level_fast = true;
    return;
  }
  if (!j.is_object() || str_member(j, "type") != "Sequence") return;
  auto it = j.find("pretokenizers");
  if (it == j.end() || !it->is_array() || it->size() != 2) return;
  const Json& split = (*it)[0];
  if (!split.is_object() || str_member(split, "type") != "Split" || str_member(split, "behavior") != "Isolated" ||
      bool_member(split, "invert", false) || !is_plain_byte_level((*it)[1], false))
    return;
  auto pat = split.find("pattern");
  if (pat == split.end() || !pat->is_object() || !pat->contains("Regex") || !(*pat)["Regex"].is_string()) return;
  impl.fast_split = std::make_shared<tok::Regex>((*pat)["Regex"].get<std::string>(),
                                                 pre.source() + ": pre_tokenizer.pretokenizers[0].pattern.Regex");
  impl.byte_level_fast = true;
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                               const std::string& source_name) {
  auto impl = std::make_shared<Impl>();
  impl->source = source_name;
  if (!tokenizer_config_json.empty()) {
    std::string config_name = source_name;
    // "dir/tokenizer.json" -> "dir/tokenizer_config.json" for messages.
    if (auto p = config_name.rfind("tokenizer.json"); p != std::string::npos && p + 14 == config_name.size())
      config_name.replace(p, 14, "tokenizer_config.json");
    else
      config_name += " (tokenizer_config.json)";
    impl->config = TokenizerConfig::parse(tokenizer_config_json, config_name);
  }

  const Json doc = parse_json(tokenizer_json, source_name);
  JsonField root(doc, impl->source, "");
  if (!doc.is_object()) root.fail("expected a JSON object at the top level");
  if (auto n = root.get("normalizer")) impl->normalizer = tok::make_normalizer(*n);
  if (auto p = root.get("pre_tokenizer")) impl->pre_tokenizer = tok::make_pre_tokenizer(*p);
  impl->model = make_model(root.at("model"));
  if (auto p = root.get("pre_tokenizer")) detect_byte_level_fast_path(*p, *impl);
  if (auto p = root.get("post_processor")) impl->post_processor = tok::make_post_processor(*p);
  if (auto d = root.get("decoder")) impl->decoder = tok::make_decoder(*d);

  std::int32_t max_id = impl->model->max_id();
  std::vector<tok::AddedToken> added;
  std::vector<std::string> normalized_contents;
  if (auto list = root.get("added_tokens")) {
    for (std::size_t i = 0; i < list->array().size(); ++i) {
      JsonField f = list->index(i);
      tok::AddedToken t;
      t.content = f.at("content").str();
      if (!utf8::is_valid(t.content)) f.at("content").fail("token is not valid UTF-8");
      std::int64_t id = f.at("id").integer();
      if (id < 0 || id > tok::kMaxTokenId) f.at("id").fail("token id out of range (0.." + std::to_string(tok::kMaxTokenId) + ")");
      t.special = f.bool_or("special", false);
      t.single_word = f.bool_or("single_word", false);
      t.lstrip = f.bool_or("lstrip", false);
      t.rstrip = f.bool_or("rstrip", false);
      t.normalized = f.bool_or("normalized", !t.special);
      // HF gives a token that already exists in the model its model id.
      if (auto model_id = impl->model->token_to_id(t.content)) t.id = *model_id;
      else t.id = static_cast<std::int32_t>(id);
      std::string norm = t.content;
      if (t.normalized && impl->normalizer) impl->normalizer->normalize(norm);
      normalized_contents.push_back(std::move(norm));
      max_id = std::max(max_id, t.id);
      impl->added_by_content.try_emplace(t.content, t.id);
      added.push_back(std::move(t));
    }
  }
  impl->vocab_size = max_id + 1;
  impl->added_index_by_id.assign(static_cast<std::size_t>(impl->vocab_size), -1);
  impl->special.assign(static_cast<std::size_t>(impl->vocab_size), false);
  for (std::size_t i = 0; i < added.size(); ++i) {
    impl->added_index_by_id[added[i].id] = static_cast<std::int32_t>(i);
    if (added[i].special) impl->special[added[i].id] = true;
  }
  impl->added.build(std::move(added), normalized_contents);

  // Transformers also treats the tokens tokenizer_config.json names as special.
  const TokenizerConfig& c = impl->config;
  auto mark = [&](const std::optional<std::string>& t) {
    if (!t) return;
    if (auto id = impl->lookup(*t)) impl->special[*id] = true;
  };
  mark(c.bos_token);
  mark(c.eos_token);
  mark(c.unk_token);
  mark(c.pad_token);
  for (const auto& t : c.additional_special_tokens) mark(t);

  // Llama/Gemma tokenizer classes rebuild the post-processor from
  // add_bos_token / add_eos_token in Transformers.
  const bool llama_like = c.tokenizer_class.rfind("LlamaTokenizer", 0) == 0 ||
                          c.tokenizer_class.rfind("CodeLlamaTokenizer", 0) == 0 ||
                          c.tokenizer_class.rfind("GemmaTokenizer", 0) == 0;
  if (llama_like) {
    std::vector<std::int32_t> prefix, suffix;
    if (c.add_bos_token && c.bos_token) {
      if (auto id = impl->lookup(*c.bos_token)) prefix.push_back(*id);
    }
    if (c.add_eos_token && c.eos_token) {
      if (auto id = impl->lookup(*c.eos_token)) suffix.push_back(*id);
    }
    impl->post_processor = tok::make_wrapping_processor(std::move(prefix), std::move(suffix));
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_pretrained(const std::filesystem::path& dir) {
  const auto json_path = dir / "tokenizer.json";
  const std::string json = read_file(json_path);
  std::string config;
  const auto config_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) config = read_file(config_path);
  Tokenizer t = from_json(json, config, json_path.string());
  const auto jinja = dir / "chat_template.jinja";
  if (!t.impl_->config.chat_template && std::filesystem::exists(jinja)) {
    auto impl = std::const_pointer_cast<Impl>(t.impl_);
    impl->config.chat_template = read_file(jinja);
  }
  return t;
}

void Tokenizer::Impl::encode_text(std::string text, bool at_start, std::vector<std::int32_t>& ids) const {
  if (byte_level_fast) {
    if (!fast_split) {
      model->tokenize_byte_level(text, ids);
      return;
    }
    thread_local std::vector<tok::Span> matches;
    fast_split->find_all(text, matches);
    // Isolated split: matches and the gaps between them, empty ones dropped.
    std::size_t prev = 0;
    std::string_view view(text);
    for (const auto& m : matches) {
      if (m.first > prev) model->tokenize_byte_level(view.substr(prev, m.first - prev), ids);
      if (m.second > m.first) model->tokenize_byte_level(view.substr(m.first, m.second - m.first), ids);
      prev = m.second;
    }
    if (prev < view.size()) model->tokenize_byte_level(view.substr(prev), ids);
    return;
  }
  thread_local std::vector<tok::Piece> pieces;
  pieces.clear();
  pieces.push_back(tok::Piece{std::move(text), at_start});
  if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
  for (const auto& p : pieces) model->tokenize(p.text, ids);
}

void Tokenizer::encode_into(std::string_view text, bool add_special_tokens, std::vector<std::int32_t>& out) const {
  const Impl& m = *impl_;
  utf8::require_valid(text, m.source + ": text to encode");
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<tok::Segment> segments, sub;
  m.added.split(text, false, segments);
  for (const auto& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    std::string piece(text.substr(seg.begin, seg.end - seg.begin));
    const bool at_start = seg.begin == 0;
    if (m.normalizer) m.normalizer->normalize(piece);
    if (!m.added.has_normalized()) {
      m.encode_text(std::move(piece), at_start, ids);
      continue;
    }
    m.added.split(piece, true, sub);
    for (const auto& s : sub) {
      if (s.id >= 0) ids.push_back(s.id);
      else m.encode_text(piece.substr(s.begin, s.end - s.begin), at_start && s.begin == 0, ids);
    }
  }
  if (m.post_processor) m.post_processor->process(ids, add_special_tokens);
  out.insert(out.end(), ids.begin(), ids.end());
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<std::int32_t> out;
  encode_into(text, add_special_tokens, out);
  return out;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  return decode(ids, skip_special_tokens, false);
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens,
                              bool clean_up_tokenization_spaces) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::int32_t id = ids[i];
    if (id < 0 || id >= m.vocab_size) {
      throw_invalid(m.source + ": cannot decode token id " + std::to_string(id) + " (at position " + std::to_string(i) +
                    "): out of range for vocab size " + std::to_string(m.vocab_size));
    }
    if (skip_special_tokens && m.special[id]) continue;
    if (std::int32_t a = m.added_index_by_id[id]; a >= 0) {
      tokens.push_back(m.added.tokens()[a].content);
    } else if (const std::string* t = m.model->id_to_token(id)) {
      tokens.push_back(*t);
    }
  }
  std::string text;
  if (m.decoder) {
    m.decoder->decode_chain(tokens);
    for (const auto& t : tokens) text += t;
  } else {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i) text += ' ';
      text += tokens[i];
    }
  }
  if (clean_up_tokenization_spaces) text = tok::clean_up_tokenization(std::move(text));
  return text;
}

std::int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const { return impl_->lookup(token); }

std::optional<std::string> Tokenizer::id_to_token(std::int32_t id) const {
  const Impl& m = *impl_;
  if (id < 0 || id >= m.vocab_size) return std::nullopt;
  if (std::int32_t a = m.added_index_by_id[id]; a >= 0) return m.added.tokens()[a].content;
  if (const std::string* t = m.model->id_to_token(id)) return *t;
  return std::nullopt;
}

bool Tokenizer::is_special(std::int32_t id) const {
  return id >= 0 && id < impl_->vocab_size && impl_->special[id];
}

const TokenizerConfig& Tokenizer::config() const { return impl_->config; }

namespace {
std::optional<std::int32_t> id_of(const Tokenizer& t, const std::optional<std::string>& token) {
  if (!token) return std::nullopt;
  return t.token_to_id(*token);
}
}  // namespace

std::optional<std::int32_t> Tokenizer::bos_token_id() const { return id_of(*this, impl_->config.bos_token); }
std::optional<std::int32_t> Tokenizer::eos_token_id() const { return id_of(*this, impl_->config.eos_token); }
std::optional<std::int32_t> Tokenizer::pad_token_id() const { return id_of(*this, impl_->config.pad_token); }
std::optional<std::int32_t> Tokenizer::unk_token_id() const { return id_of(*this, impl_->config.unk_token); }

}  // namespace hipformers
