#include "hipformers/core/utf8.h"

#include <gtest/gtest.h>

#include "hipformers/core/error.h"

namespace hipformers {
namespace {

TEST(Utf8, ValidatesWellFormedText) {
  EXPECT_TRUE(utf8::is_valid(""));
  EXPECT_TRUE(utf8::is_valid("plain ascii"));
  EXPECT_TRUE(utf8::is_valid("caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80"));
  EXPECT_TRUE(utf8::is_valid("\xF4\x8F\xBF\xBF"));  // U+10FFFF
}

TEST(Utf8, RejectsIllFormedTextWithOffset) {
  struct Case {
    std::string text;
    std::size_t offset;
  } cases[] = {
      {"ab\xFF", 2},             // invalid byte
      {"a\xC0\xAF", 1},          // overlong '/'
      {"\xE0\x80\xAF", 0},       // overlong 3-byte
      {"x\xED\xA0\x80", 1},      // surrogate U+D800
      {"\xF4\x90\x80\x80", 0},   // above U+10FFFF
      {"ok\xE4\xB8", 2},         // truncated
      {"\x80", 0},               // lone continuation
  };
  for (const auto& c : cases) {
    std::size_t offset = 999;
    EXPECT_FALSE(utf8::is_valid(c.text, &offset));
    EXPECT_EQ(offset, c.offset);
  }
  try {
    utf8::require_valid("ab\xFF", "prompt.txt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "prompt.txt: invalid UTF-8 at byte offset 2");
  }
}

TEST(Utf8, DecodeEncodeRoundTrip) {
  std::string s = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";
  std::size_t pos = 0;
  std::u32string cps;
  while (pos < s.size()) cps.push_back(utf8::decode(s, pos));
  EXPECT_EQ(cps, (std::u32string{U'a', U'\u00E9', U'\u4E2D', U'\U0001F600'}));
  std::string back;
  for (char32_t c : cps) utf8::append(back, c);
  EXPECT_EQ(back, s);
  EXPECT_EQ(utf8::count_code_points(s), 4u);
}

TEST(Utf8, LossyMatchesRustMaximalSubpart) {
  // Expected values follow Rust's String::from_utf8_lossy (one U+FFFD per
  // maximal ill-formed subpart), which is what HF tokenizers' decode uses.
  const std::string R = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8::from_bytes_lossy("abc"), "abc");
  EXPECT_EQ(utf8::from_bytes_lossy("\xFF"), R);
  EXPECT_EQ(utf8::from_bytes_lossy("\xE4\xB8"), R);               // truncated 3-byte: one replacement
  EXPECT_EQ(utf8::from_bytes_lossy("\xE4\xB8x"), R + "x");
  EXPECT_EQ(utf8::from_bytes_lossy("\xF0\x9F\x98"), R);           // truncated 4-byte
  EXPECT_EQ(utf8::from_bytes_lossy("\xC0\xAF"), R + R);           // C0 is never valid
  EXPECT_EQ(utf8::from_bytes_lossy("\xED\xA0\x80"), R + R + R);   // surrogate: ED then two strays
  EXPECT_EQ(utf8::from_bytes_lossy("\x80\x80"), R + R);
  EXPECT_EQ(utf8::from_bytes_lossy("a\xF0\x9F\x98\x80" "b"), "a\xF0\x9F\x98\x80" "b");
}

}  // namespace
}  // namespace hipformers
