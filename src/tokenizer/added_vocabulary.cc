#include "added_vocabulary.h"

#include <algorithm>

#include "hipformers/core/utf8.h"
#include "unicode_props.h"

namespace hipformers::tok {

std::int32_t TokenMatcher::child(std::int32_t node, unsigned char b) const {
  for (const auto& [byte, next] : nodes_[node].children)
    if (byte == b) return next;
  return -1;
}

void TokenMatcher::add(std::string_view key, std::int32_t value) {
  if (key.empty()) return;  // HF ignores empty added tokens
  std::int32_t node = 0;
  first_byte_[static_cast<unsigned char>(key[0])] = true;
  for (unsigned char b : key) {
    std::int32_t next = child(node, b);
    if (next < 0) {
      next = static_cast<std::int32_t>(nodes_.size());
      nodes_[node].children.emplace_back(b, next);
      nodes_.emplace_back();
    }
    node = next;
  }
  if (nodes_[node].value < 0) nodes_[node].value = value;
}

void TokenMatcher::find_all(std::string_view text, std::vector<Match>& out) const {
  out.clear();
  if (empty()) return;
  std::size_t i = 0;
  while (i < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    std::int32_t node = 0, best_value = -1;
    std::size_t best_end = 0;
    for (std::size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<unsigned char>(text[j]));
      if (node < 0) break;
      if (nodes_[node].value >= 0) {
        best_value = nodes_[node].value;
        best_end = j + 1;
      }
    }
    if (best_value >= 0) {
      out.push_back(Match{i, best_end, best_value});
      i = best_end;
    } else {
      ++i;
    }
  }
}

void AddedVocabulary::build(std::vector<AddedToken> tokens, const std::vector<std::string>& normalized_contents) {
  tokens_ = std::move(tokens);
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].normalized) normalized_.add(normalized_contents[i], static_cast<std::int32_t>(i));
    else raw_.add(tokens_[i].content, static_cast<std::int32_t>(i));
  }
}

namespace {

bool ends_with_word(std::string_view s) { return !s.empty() && is_word_char(last_code_point(s)); }

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  std::size_t pos = 0;
  return is_word_char(utf8::decode(s, pos));
}

}  // namespace

void AddedVocabulary::split(std::string_view text, bool normalized_set, std::vector<Segment>& out) const {
  out.clear();
  const TokenMatcher& matcher = normalized_set ? normalized_ : raw_;
  thread_local std::vector<TokenMatcher::Match> matches;
  matcher.find_all(text, matches);
  // HF AddedVocabulary::find_matches.
  std::size_t start_offset = 0;
  for (const auto& m : matches) {
    const AddedToken& tok = tokens_[m.value];
    std::size_t start = m.begin, stop = m.end;
    if (tok.single_word) {
      bool start_space = start == 0 || !ends_with_word(text.substr(0, start));
      bool stop_space = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) {
      std::size_t new_start = start;
      while (new_start > 0) {
        std::size_t cp_start;
        if (!is_whitespace(last_code_point(text.substr(0, new_start), &cp_start))) break;
        new_start = cp_start;
      }
      start = std::max(new_start, start_offset);
    }
    if (tok.rstrip) {
      std::size_t pos = stop;
      while (pos < text.size()) {
        std::size_t next = pos;
        if (!is_whitespace(utf8::decode(text, next))) break;
        pos = next;
      }
      stop = pos;
    }
    if (start_offset < start) out.push_back(Segment{start_offset, start, -1});
    out.push_back(Segment{start, stop, tok.id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back(Segment{start_offset, text.size(), -1});
}

}  // namespace hipformers::tok
