// GPT-2's byte <-> unicode alphabet: every byte gets a printable character so
// byte-level BPE vocabularies are plain strings. Printable Latin-1 bytes map to
// themselves, the other 68 bytes to U+0100.. in byte order.
#pragma once

#include <array>
#include <string>

namespace hipformers::tok {

class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& get();
  // UTF-8 of the character standing for byte b.
  const std::string& encode(unsigned char b) const { return byte_to_utf8_[b]; }
  char32_t code_point(unsigned char b) const { return byte_to_cp_[b]; }
  // The byte a character stands for, or -1 if it is not in the alphabet.
  int decode(char32_t c) const { return c < 324 ? cp_to_byte_[c] : -1; }

 private:
  ByteLevelAlphabet();
  std::array<std::string, 256> byte_to_utf8_;
  std::array<char32_t, 256> byte_to_cp_{};
  std::array<int, 324> cp_to_byte_{};
};

}  // namespace hipformers::tok
