// UTF-8 helpers shared by the tokenizer, the chat-template engine and the CLI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hipformers::utf8 {

// Returns true if `text` is well-formed UTF-8 (no overlongs, no surrogates, no
// code points above U+10FFFF). On failure `*bad_offset` (if given) receives the
// byte offset of the first ill-formed sequence.
bool is_valid(std::string_view text, std::size_t* bad_offset = nullptr);

// Throws Error(kInvalidInput) naming `what` and the byte offset if `text` is not
// valid UTF-8.
void require_valid(std::string_view text, const std::string& what);

// Decodes the code point starting at `text[pos]` of a string known to be valid
// UTF-8 and advances `pos` past it.
char32_t decode(std::string_view text, std::size_t& pos);

// Length in bytes of the sequence whose lead byte is `lead` (1 for invalid leads).
inline std::size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

void append(std::string& out, char32_t cp);
std::string encode(char32_t cp);

// Converts arbitrary bytes to valid UTF-8 the way Rust's String::from_utf8_lossy
// does (and so Hugging Face `tokenizers` when decoding byte-level tokens): each
// maximal ill-formed subpart becomes one U+FFFD.
std::string from_bytes_lossy(std::string_view bytes);

// Number of code points in a valid UTF-8 string.
std::size_t count_code_points(std::string_view text);

}  // namespace hipformers::utf8
