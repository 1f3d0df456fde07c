// tokenizer.json "added_tokens": tokens matched in the text before anything
// else runs (special tokens such as <|im_start|>, and user-added words).
//
// Matching follows HF AddedVocabulary: leftmost-longest over all tokens of a
// set, non-overlapping; single_word tokens must not touch word characters;
// lstrip / rstrip tokens swallow the whitespace on that side. Tokens with
// normalized=false are matched on the raw input, normalized=true ones on the
// normalized text of what is left.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hipformers::tok {

struct AddedToken {
  std::string content;
  std::int32_t id = -1;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// A leftmost-longest matcher over a fixed set of strings (a byte trie).
class TokenMatcher {
 public:
  void add(std::string_view key, std::int32_t value);
  bool empty() const { return nodes_.size() <= 1; }
  struct Match {
    std::size_t begin, end;
    std::int32_t value;
  };
  // Non-overlapping matches, earliest start first, longest at each start.
  void find_all(std::string_view text, std::vector<Match>& out) const;

 private:
  struct Node {
    std::int32_t value = -1;
    std::vector<std::pair<unsigned char, std::int32_t>> children;
  };
  std::int32_t child(std::int32_t node, unsigned char b) const;
  std::vector<Node> nodes_{1};
  bool first_byte_[256] = {};
};

// A piece of input after added-token extraction: either an added token (id
// >= 0) or text still to be tokenized.
struct Segment {
  std::size_t begin, end;
  std::int32_t id;  // -1: plain text
};

class AddedVocabulary {
 public:
  // `tokens` indexes refer to this list; `normalized_contents[i]` is the
  // normalized form of tokens[i] (used for normalized tokens).
  void build(std::vector<AddedToken> tokens, const std::vector<std::string>& normalized_contents);

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool has_normalized() const { return !normalized_.empty(); }

  // Splits `text` using the raw-text (normalized=false) or normalized set.
  void split(std::string_view text, bool normalized_set, std::vector<Segment>& out) const;

 private:
  std::vector<AddedToken> tokens_;
  TokenMatcher raw_, normalized_;
};

}  // namespace hipformers::tok
