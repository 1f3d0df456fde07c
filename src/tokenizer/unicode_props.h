// Character predicates with the meaning Rust gives them, since HF tokenizers
// is written in Rust (char::is_whitespace, char::is_numeric, ...).
#pragma once

#include <string>
#include <string_view>

namespace hipformers::tok {

// Rust char::is_whitespace: the Unicode White_Space property.
bool is_whitespace(char32_t c);
// Rust char::is_numeric: general categories Nd, Nl, No.
bool is_numeric(char32_t c);
// Unicode general category P* (unicode_categories' is_punctuation).
bool is_punctuation(char32_t c);
// HF's BERT punctuation: ASCII punctuation or any P* character.
bool is_bert_punctuation(char32_t c);
// Rust regex \w (Unicode word character), used for single_word added tokens.
bool is_word_char(char32_t c);

// Decodes the last code point of valid UTF-8 `s` (s non-empty).
char32_t last_code_point(std::string_view s, std::size_t* start = nullptr);

}  // namespace hipformers::tok
