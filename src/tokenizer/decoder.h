// tokenizer.json "decoder": turns the token strings of an id sequence back
// into text. Each decoder maps a token list to a token list (HF decode_chain);
// the final list is concatenated.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "json_fields.h"

namespace hipformers::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const JsonField& field);

// Replaces every non-overlapping occurrence of `from` (non-empty) by `to`,
// left to right, like Python's / Rust's str.replace.
void replace_all(std::string& s, std::string_view from, std::string_view to);

// Transformers' PreTrainedTokenizerBase.clean_up_tokenization.
std::string clean_up_tokenization(std::string text);

}  // namespace hipformers::tok
