// The three real tokenizers (npm assets): loading, known ids, round trips.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace hipformers {
namespace {

using Ids = std::vector<std::int32_t>;

const Tokenizer& get(const std::string& name) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, Tokenizer::from_pretrained(testing::tokenizer_dir(name))).first;
  return it->second;
}

TEST(RealTokenizers, HelloWorldIds) {
  EXPECT_EQ(get("qwen3").encode("Hello world"), (Ids{9707, 1879}));
  EXPECT_EQ(get("gpt2").encode("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(get("llama3").encode("Hello world"), (Ids{9906, 1917}));
}

TEST(RealTokenizers, TokenStrings) {
  const auto& q = get("qwen3");
  EXPECT_EQ(q.id_to_token(9707), "Hello");
  EXPECT_EQ(q.id_to_token(1879), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(q.token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(q.token_to_id("<|endoftext|>"), 151643);
  EXPECT_EQ(get("gpt2").token_to_id("<|endoftext|>"), 50256);
  EXPECT_EQ(get("llama3").token_to_id("<|begin_of_text|>"), 128000);
}

TEST(RealTokenizers, VocabSizes) {
  EXPECT_EQ(get("gpt2").vocab_size(), 50257);
  EXPECT_EQ(get("llama3").vocab_size(), 128256);
  EXPECT_EQ(get("qwen3").vocab_size(), 151669);
}

TEST(RealTokenizers, SpecialTokensSplitFirst) {
  const auto& q = get("qwen3");
  Ids ids = q.encode("<|im_start|>user\nHi<|im_end|>");
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 151644);
  EXPECT_EQ(ids.back(), 151645);
  EXPECT_EQ(q.decode(ids), "<|im_start|>user\nHi<|im_end|>");
  EXPECT_EQ(q.decode(ids, /*skip_special_tokens=*/true), "user\nHi");
  EXPECT_TRUE(q.is_special(151644));
  EXPECT_FALSE(q.is_special(9707));
  // Non-special added tokens are still split out and survive skip_special_tokens.
  auto think = q.token_to_id("<think>");
  ASSERT_TRUE(think.has_value());
  EXPECT_FALSE(q.is_special(*think));
  Ids t = q.encode("<think>x</think>");
  EXPECT_EQ(t.front(), *think);
  EXPECT_EQ(q.decode(t, true), "<think>x</think>");

  const auto& g = get("gpt2");
  EXPECT_EQ(g.encode("a<|endoftext|>b"), (Ids{64, 50256, 65}));
}

TEST(RealTokenizers, NoSpecialTokensAddedByDefault) {
  // None of the three post-processors adds BOS/EOS (ByteLevel post-processor).
  EXPECT_EQ(get("llama3").encode("Hello world", true), get("llama3").encode("Hello world", false));
  EXPECT_TRUE(get("qwen3").encode("").empty());
  EXPECT_TRUE(get("llama3").encode("").empty());
}

TEST(RealTokenizers, Gpt2PrefixSpaceWords) {
  const auto& g = get("gpt2");
  EXPECT_EQ(g.encode(" Hello"), (Ids{18435}));
  EXPECT_EQ(g.id_to_token(18435), "\xC4\xA0Hello");
}

TEST(RealTokenizers, Llama3DigitsInThrees) {
  const auto& l = get("llama3");
  Ids ids = l.encode("1234567");
  // \p{N}{1,3}: "123" "456" "7"
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(l.id_to_token(ids[0]), "123");
  EXPECT_EQ(l.id_to_token(ids[1]), "456");
  EXPECT_EQ(l.id_to_token(ids[2]), "7");
  // Qwen splits every digit.
  EXPECT_EQ(get("qwen3").encode("1234567").size(), 7u);
}

TEST(RealTokenizers, RoundTrip) {
  const std::vector<std::string> texts = {
      "Hello world",
      "  leading and trailing spaces  ",
      "tabs\tand\nnewlines\r\n\n\nend",
      "Don't stop, it's 3.14159 and 2024-01-01!",
      "中文测试：你好，世界。日本語のテキストです。한국어 텍스트",
      "emoji 😀🎉👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷",
      "Ünïcödé façade naïve résumé Ελληνικά Русский текст العربية עברית हिन्दी",
      "code: for (int i = 0; i < n; ++i) { x[i] *= 2; }  // comment",
      "\xC2\xA0nbsp\xC2\xA0" "and\xE2\x80\x8Bzero-width\xC2\x85next-line",
      "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n",
      "<|endoftext|><|endoftext|>a<|endoftext|>",
      "A",
      "\n",
      " ",
  };
  for (const char* name : {"qwen3", "llama3", "gpt2"}) {
    const auto& t = get(name);
    for (const auto& text : texts) {
      Ids ids = t.encode(text);
      std::string back = t.decode(ids);
      EXPECT_EQ(back, text) << name << ": " << text;
    }
  }
}

TEST(RealTokenizers, CleanUpTokenizationSpacesIsOptIn) {
  // gpt2/llama3 configs set clean_up_tokenization_spaces=true, qwen3 false;
  // Transformers 5 decode ignores it, the 3-argument decode applies it.
  const std::string text = "Hello , world . Is it ?";
  for (const char* name : {"gpt2", "llama3", "qwen3"}) {
    const auto& t = get(name);
    auto ids = t.encode(text);
    EXPECT_EQ(t.decode(ids), text) << name;
    EXPECT_EQ(t.decode(ids, false, t.config().clean_up_tokenization_spaces),
              t.config().clean_up_tokenization_spaces ? "Hello, world. Is it?" : text) << name;
  }
}

TEST(RealTokenizers, ByteLevelDecodeIsLossyOnBrokenUtf8) {
  const auto& q = get("qwen3");
  Ids ids = q.encode("😀");  // 4 bytes -> several byte-level tokens
  ASSERT_GE(ids.size(), 1u);
  // Drop the last token: the remaining bytes are an incomplete sequence.
  if (ids.size() > 1) {
    Ids partial(ids.begin(), ids.end() - 1);
    EXPECT_EQ(q.decode(partial), "\xEF\xBF\xBD");
  }
}

TEST(RealTokenizers, DecodeRejectsOutOfRangeIds) {
  const auto& q = get("qwen3");
  Ids bad = {9707, q.vocab_size()};
  try {
    q.decode(bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(q.vocab_size())), std::string::npos) << e.what();
  }
  Ids negative = {-1};
  EXPECT_THROW(q.decode(negative), Error);
}

TEST(RealTokenizers, EncodeRejectsInvalidUtf8) {
  try {
    get("gpt2").encode(std::string("ab\xFF" "cd"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("offset 2"), std::string::npos) << e.what();
  }
}

TEST(RealTokenizers, Config) {
  const auto& q = get("qwen3").config();
  EXPECT_EQ(q.eos_token, "<|im_end|>");
  EXPECT_EQ(q.pad_token, "<|endoftext|>");
  EXPECT_FALSE(q.bos_token.has_value());
  EXPECT_EQ(q.model_max_length, 131072);
  EXPECT_TRUE(q.chat_template.has_value());
  EXPECT_FALSE(q.clean_up_tokenization_spaces);
  EXPECT_EQ(q.additional_special_tokens.size(), 13u);
  const auto& l = get("llama3").config();
  EXPECT_TRUE(l.clean_up_tokenization_spaces);
  EXPECT_EQ(l.bos_token, "<|begin_of_text|>");
  EXPECT_EQ(l.model_max_length, INT64_MAX);  // 1e30 clamped
  EXPECT_EQ(get("gpt2").config().model_max_length, 1024);
  EXPECT_EQ(get("qwen3").eos_token_id(), 151645);
}

TEST(RealTokenizers, SharedAcrossThreads) {
  const auto& q = get("qwen3");
  const std::string text = "The quick brown fox jumps over the lazy dog. 敏捷的棕色狐狸。";
  Ids expected = q.encode(text);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i)
        if (q.encode(text) != expected) ++mismatches;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace hipformers
