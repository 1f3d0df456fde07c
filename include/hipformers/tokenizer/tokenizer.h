// Hugging Face `tokenizer.json` tokenizers.
//
// Encoding reproduces the Python `tokenizers` library (Tokenizer.encode with
// add_special_tokens) id for id: added tokens are split out first, the rest
// goes through normalizer -> pre-tokenizer -> model (BPE), then the
// post-processor. Decoding reproduces Transformers' `tokenizer.decode`: the
// `tokenizers` decoder chain followed, when tokenizer_config.json asks for it,
// by Transformers' clean_up_tokenization.
//
// A Tokenizer is an immutable value that shares its state: copies are cheap
// and every const method may be called from several threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace hipformers {

// What Transformers reads from tokenizer_config.json. Every field is optional
// in the file.
struct TokenizerConfig {
  // Special tokens, given in the file as strings or {"content": ...} objects.
  std::optional<std::string> bos_token, eos_token, unk_token, pad_token;
  std::vector<std::string> additional_special_tokens;
  // Only honoured where Transformers honours them: tokenizer classes whose
  // constructor rebuilds the post-processor (LlamaTokenizer[Fast],
  // CodeLlamaTokenizer[Fast], GemmaTokenizer[Fast]). Elsewhere the
  // tokenizer.json post-processor alone decides.
  bool add_bos_token = false, add_eos_token = false;
  bool clean_up_tokenization_spaces = false;
  std::string tokenizer_class;
  // A string; when the file holds a list of {name, template}, the one named
  // "default" (all of them are in named_chat_templates).
  std::optional<std::string> chat_template;
  std::map<std::string, std::string> named_chat_templates;
  // 0 = unknown. Transformers writes int(1e30) for "no limit"; values beyond
  // int64 are clamped to INT64_MAX.
  std::int64_t model_max_length = 0;
  // The whole file, for the chat-template context.
  nlohmann::ordered_json raw;

  // Parses tokenizer_config.json text; `source_name` names it in errors.
  static TokenizerConfig parse(std::string_view json_text, const std::string& source_name);

  // The special tokens a chat template sees, as Transformers passes its
  // special_tokens_map: only those that are set ({"bos_token": "...", ...}).
  nlohmann::ordered_json chat_template_special_tokens() const;
};

class Tokenizer {
 public:
  // dir/tokenizer.json, plus dir/tokenizer_config.json when present (and
  // dir/chat_template.jinja when the config carries no template).
  static Tokenizer from_pretrained(const std::filesystem::path& dir);
  // `tokenizer_config_json` empty = no config. `source_name` prefixes errors.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                             const std::string& source_name);

  // Throws Error on invalid UTF-8 (naming the byte offset).
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Same as encode() but appends to `out` (avoids a vector per call).
  void encode_into(std::string_view text, bool add_special_tokens, std::vector<std::int32_t>& out) const;
  // == transformers (5.x) tokenizer.decode(ids, skip_special_tokens=...):
  // the tokenizer.json decoder chain only. Transformers 5 does not apply
  // clean_up_tokenization even where tokenizer_config.json sets
  // clean_up_tokenization_spaces (checked against reference output of
  // transformers 5.17 / tokenizers 0.23.2 for llama3 and gpt2). Throws Error
  // naming the id and vocab size for an id < 0 or >= vocab_size().
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;
  // Transformers 4.x behaviour: with clean_up_tokenization_spaces (pass
  // config().clean_up_tokenization_spaces) " ." -> "." etc. afterwards.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens,
                     bool clean_up_tokenization_spaces) const;

  // == len(transformers tokenizer): max id + 1 over the vocab and added tokens.
  std::int32_t vocab_size() const;
  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(std::int32_t id) const;
  // True for added tokens marked special (and tokens tokenizer_config names as
  // special): the ids decode(..., skip_special_tokens=true) drops.
  bool is_special(std::int32_t id) const;
  const TokenizerConfig& config() const;

  // Ids of config().bos_token / eos_token / pad_token / unk_token, if they name tokens.
  std::optional<std::int32_t> bos_token_id() const;
  std::optional<std::int32_t> eos_token_id() const;
  std::optional<std::int32_t> pad_token_id() const;
  std::optional<std::int32_t> unk_token_id() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace hipformers
