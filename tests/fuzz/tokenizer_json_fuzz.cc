// libFuzzer target: arbitrary bytes as tokenizer.json. Loading must either
// succeed or throw hipformers::Error (any other exception, crash or sanitizer
// report is a bug); a tokenizer that loads must encode and decode a fixed
// string without crashing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  try {
    auto tok = hipformers::Tokenizer::from_json(json, "", "fuzz/tokenizer.json");
    static const std::string kText = "Hello world! <|im_start|> 123 \xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80  \n\tend";
    std::vector<std::int32_t> ids = tok.encode(kText);
    (void)tok.decode(ids);
    (void)tok.decode(ids, true);
    std::vector<std::int32_t> all;
    for (std::int32_t i = 0; i < tok.vocab_size() && i < 64; ++i) all.push_back(i);
    (void)tok.decode(all);
  } catch (const hipformers::Error&) {
  }
  return 0;
}
