// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}).
//
// Works on token ids rather than strings: a word becomes a list of symbol ids
// which are merged pairwise through a (left id, right id) -> (rank, new id)
// table, lowest rank first and leftmost among equals (HF's priority-queue
// order). Results are cached per word, since natural text repeats words.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "json_fields.h"
#include "string_map.h"

namespace hipformers::tok {

// Open-addressing map from a pair of ids to (rank, merged id). The hot loop of
// BPE probes it once per adjacent pair, so it avoids std::unordered_map nodes.
class MergeTable {
 public:
  struct Entry {
    std::uint64_t key;
    std::uint32_t rank;
    std::int32_t new_id;
  };
  void reserve(std::size_t n);
  // Later insertions of the same pair overwrite earlier ones (HF builds a
  // HashMap from the merge list, so the last duplicate wins).
  void insert(std::int32_t a, std::int32_t b, std::uint32_t rank, std::int32_t new_id);
  const Entry* find(std::int32_t a, std::int32_t b) const {
    if (slots_.empty()) return nullptr;
    std::uint64_t key = pack(a, b);
    std::size_t i = slot_of(key);
    while (true) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }

 private:
  static constexpr std::uint64_t kEmpty = ~0ull;
  static std::uint64_t pack(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  std::size_t slot_of(std::uint64_t key) const { return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  std::vector<Entry> slots_;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
};

// Bounded, thread-safe word -> ids cache, sharded to keep lock contention low.
class WordCache {
 public:
  bool lookup(std::string_view word, std::vector<std::int32_t>& out) const;
  void insert(std::string_view word, const std::vector<std::int32_t>& ids, std::size_t from) const;

 private:
  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kMaxPerShard = 8192;
  struct Shard {
    std::mutex mu;
    StringMap<std::vector<std::int32_t>> map;
  };
  mutable Shard shards_[kShards];
};

class BpeModel {
 public:
  // `field` is tokenizer.json "model".
  explicit BpeModel(const JsonField& field);

  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<std::int32_t>& out) const;
  // Same for a word given as raw bytes that a ByteLevel pre-tokenizer would
  // map to the byte alphabet first: equivalent to tokenize(byte_level(word))
  // but the cache is keyed by the raw bytes, so cache hits skip the mapping.
  void tokenize_byte_level(std::string_view raw_word, std::vector<std::int32_t>& out) const;

  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(std::int32_t id) const;
  std::int32_t max_id() const { return static_cast<std::int32_t>(id_to_token_.size()) - 1; }

 private:
  void merge_word(std::string_view word, std::vector<std::int32_t>& out) const;
  std::int32_t lookup_char(std::string_view ch) const;

  StringMap<std::int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  MergeTable merges_;
  // Single code points below U+10000 -> id (-1 = absent); skips hashing for
  // the initial symbols, which byte-level vocabularies always hit.
  std::vector<std::int32_t> char_ids_;
  std::int32_t byte_ids_[256];  // <0xNN> tokens for byte_fallback (-1 = absent)
  std::string prefix_, suffix_;  // continuing_subword_prefix / end_of_word_suffix
  std::optional<std::string> unk_token_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::string source_;
  WordCache cache_;
  WordCache byte_level_cache_;  // keyed by raw bytes (tokenize_byte_level)
};

}  // namespace hipformers::tok
