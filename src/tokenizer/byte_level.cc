#include "byte_level.h"

#include "hipformers/core/utf8.h"

namespace hipformers::tok {

ByteLevelAlphabet::ByteLevelAlphabet() {
  cp_to_byte_.fill(-1);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    char32_t cp = printable ? static_cast<char32_t>(b) : next++;
    byte_to_cp_[b] = cp;
    byte_to_utf8_[b] = utf8::encode(cp);
    cp_to_byte_[cp] = b;
  }
}

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

}  // namespace hipformers::tok
