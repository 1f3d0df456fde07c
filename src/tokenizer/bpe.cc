#include "bpe.h"

#include <algorithm>
#include <bit>
#include <cstdio>

#include "byte_level.h"
#include "hipformers/core/error.h"
#include "hipformers/core/utf8.h"

namespace hipformers::tok {

void MergeTable::reserve(std::size_t n) {
  std::size_t cap = std::bit_ceil(std::max<std::size_t>(16, n * 2));
  slots_.assign(cap, Entry{kEmpty, 0, 0});
  mask_ = cap - 1;
  shift_ = 64 - std::countr_zero(cap);
  size_ = 0;
}

void MergeTable::insert(std::int32_t a, std::int32_t b, std::uint32_t rank, std::int32_t new_id) {
  if ((size_ + 1) * 2 > slots_.size()) {
    std::vector<Entry> old;
    old.swap(slots_);
    reserve(std::max<std::size_t>(old.size(), 16));
    for (const auto& e : old)
      if (e.key != kEmpty) insert(static_cast<std::int32_t>(e.key >> 32), static_cast<std::int32_t>(e.key & 0xffffffffu), e.rank, e.new_id);
  }
  std::uint64_t key = pack(a, b);
  std::size_t i = slot_of(key);
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
  if (slots_[i].key == kEmpty) ++size_;
  slots_[i] = Entry{key, rank, new_id};
}

bool WordCache::lookup(std::string_view word, std::vector<std::int32_t>& out) const {
  std::size_t h = StringHash{}(word);
  Shard& s = shards_[h % kShards];
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(word);
  if (it == s.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::insert(std::string_view word, const std::vector<std::int32_t>& ids, std::size_t from) const {
  if (word.size() > 256) return;
  std::size_t h = StringHash{}(word);
  Shard& s = shards_[h % kShards];
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.map.size() >= kMaxPerShard) s.map.clear();  // bounded memory for long-running servers
  s.map.try_emplace(std::string(word), ids.begin() + static_cast<std::ptrdiff_t>(from), ids.end());
}

BpeModel::BpeModel(const JsonField& field) : source_(field.source()) {
  if (auto d = field.get("dropout")) {
    if (d->number() != 0.0) d->fail("BPE dropout is not supported (it makes tokenization nondeterministic); expected null or 0");
  }
  if (auto p = field.get("continuing_subword_prefix")) prefix_ = p->str();
  if (auto s = field.get("end_of_word_suffix")) suffix_ = s->str();
  unk_token_ = field.opt_str("unk_token");
  fuse_unk_ = field.bool_or("fuse_unk", false);
  byte_fallback_ = field.bool_or("byte_fallback", false);
  ignore_merges_ = field.bool_or("ignore_merges", false);

  JsonField vocab = field.at("vocab");
  const auto& obj = vocab.object();
  vocab_.reserve(obj.size());
  std::int64_t max_id = -1;
  for (const auto& [token, value] : obj) {
    JsonField v(value, field.source(), vocab.path() + "[\"" + token + "\"]");
    std::int64_t id = v.integer();
    if (id < 0 || id > kMaxTokenId) v.fail("token id out of range (0.." + std::to_string(kMaxTokenId) + ")");
    if (!utf8::is_valid(token)) v.fail("token is not valid UTF-8");
    vocab_[token] = static_cast<std::int32_t>(id);
    max_id = std::max(max_id, id);
  }
  id_to_token_.assign(static_cast<std::size_t>(max_id + 1), std::string());
  has_id_.assign(static_cast<std::size_t>(max_id + 1), false);
  char_ids_.assign(0x10000, -1);
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  for (const auto& [token, id] : vocab_) {
    id_to_token_[id] = token;
    has_id_[id] = true;
    std::size_t pos = 0;
    if (!token.empty()) {
      char32_t c = utf8::decode(token, pos);
      if (pos == token.size() && c < 0x10000) char_ids_[c] = id;
    }
    if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') {
      unsigned v = 0;
      bool ok = true;
      for (int k = 3; k < 5; ++k) {
        char c = token[k];
        if (c >= '0' && c <= '9') v = v * 16 + (c - '0');
        else if (c >= 'A' && c <= 'F') v = v * 16 + (c - 'A' + 10);
        else ok = false;  // HF formats the lookup key with upper-case hex
      }
      if (ok) byte_ids_[v] = id;
    }
  }

  JsonField merges = field.at("merges");
  const auto& list = merges.array();
  merges_.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    JsonField m = merges.index(i);
    std::string a, b;
    if (m.json().is_string()) {
      std::string line = m.str();
      std::size_t sp = line.find(' ');
      if (sp == std::string::npos) m.fail("expected two tokens separated by a space");
      a = line.substr(0, sp);
      b = line.substr(sp + 1);
    } else if (m.json().is_array()) {
      if (m.array().size() != 2) m.fail("expected two tokens");
      a = m.index(0).str();
      b = m.index(1).str();
    } else {
      m.fail("expected \"a b\" or [\"a\", \"b\"]");
    }
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia == vocab_.end()) m.fail("merge token '" + a + "' is not in the vocabulary");
    if (ib == vocab_.end()) m.fail("merge token '" + b + "' is not in the vocabulary");
    if (b.size() < prefix_.size()) m.fail("merge token '" + b + "' is shorter than continuing_subword_prefix");
    std::string merged = a + b.substr(prefix_.size());
    auto im = vocab_.find(merged);
    if (im == vocab_.end()) m.fail("merged token '" + merged + "' is not in the vocabulary");
    merges_.insert(ia->second, ib->second, static_cast<std::uint32_t>(i), im->second);
  }
}

std::optional<std::int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

std::int32_t BpeModel::lookup_char(std::string_view ch) const {
  auto it = vocab_.find(ch);
  return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::tokenize(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (cache_.lookup(word, out)) return;
  std::size_t from = out.size();
  merge_word(word, out);
  cache_.insert(word, out, from);
}

void BpeModel::tokenize_byte_level(std::string_view raw, std::vector<std::int32_t>& out) const {
  if (raw.empty()) return;
  if (byte_level_cache_.lookup(raw, out)) return;
  thread_local std::string mapped;
  mapped.clear();
  const auto& alphabet = ByteLevelAlphabet::get();
  for (unsigned char b : raw) mapped += alphabet.encode(b);
  std::size_t from = out.size();
  auto it = ignore_merges_ ? vocab_.find(std::string_view(mapped)) : vocab_.end();
  if (it != vocab_.end()) out.push_back(it->second);
  else merge_word(mapped, out);
  byte_level_cache_.insert(raw, out, from);
}

namespace {

struct Symbol {
  std::int32_t id;
  std::int32_t prev, next;
  bool alive;
};

struct Candidate {
  std::uint32_t rank;
  std::int32_t pos;
  std::int32_t new_id;
};

// Heap order: lowest rank on top, then lowest position (HF's Merge::cmp).
struct CandidateAfter {
  bool operator()(const Candidate& x, const Candidate& y) const {
    if (x.rank != y.rank) return x.rank > y.rank;
    return x.pos > y.pos;
  }
};

}  // namespace

void BpeModel::merge_word(std::string_view word, std::vector<std::int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  thread_local std::string scratch;
  symbols.clear();
  heap.clear();

  auto add = [&](std::int32_t id) {
    std::int32_t n = static_cast<std::int32_t>(symbols.size());
    symbols.push_back(Symbol{id, n - 1, n + 1, true});
  };

  // 1. Characters -> initial symbols (HF BPE::merge_word).
  const bool plain = prefix_.empty() && suffix_.empty();
  std::int32_t unk = -1;  // pending unknown symbol (for fuse_unk), -1 = none
  std::size_t pos = 0;
  while (pos < word.size()) {
    std::size_t start = pos;
    char32_t c = utf8::decode(word, pos);
    std::string_view ch = word.substr(start, pos - start);
    std::int32_t id;
    std::string_view s = ch;
    if (plain) {
      id = c < 0x10000 ? char_ids_[c] : lookup_char(ch);
    } else {
      scratch.clear();
      if (start != 0) scratch += prefix_;
      scratch.append(ch);
      if (pos == word.size()) scratch += suffix_;
      s = scratch;
      id = lookup_char(s);
    }
    if (id >= 0) {
      if (unk >= 0) {
        add(unk);
        unk = -1;
      }
      add(id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : s) all = all && byte_ids_[b] >= 0;
      if (all) {
        // HF pushes the byte tokens without flushing a pending unk first.
        for (unsigned char b : s) add(byte_ids_[b]);
        continue;
      }
    }
    if (unk_token_) {
      auto it = vocab_.find(*unk_token_);
      if (it == vocab_.end()) throw_invalid(source_ + ": model.unk_token '" + *unk_token_ + "' is not in the vocabulary");
      if (unk >= 0 && fuse_unk_) continue;
      if (unk >= 0) add(unk);
      unk = it->second;
    }
  }
  if (unk >= 0) add(unk);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  // 2. Merge, lowest rank first.
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const auto* m = merges_.find(symbols[i].id, symbols[i + 1].id))
      heap.push_back(Candidate{m->rank, static_cast<std::int32_t>(i), m->new_id});
  }
  std::make_heap(heap.begin(), heap.end(), CandidateAfter{});
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), CandidateAfter{});
    Candidate top = heap.back();
    heap.pop_back();
    Symbol& cur = symbols[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    Symbol& right = symbols[cur.next];
    const auto* m = merges_.find(cur.id, right.id);
    if (!m || m->new_id != top.new_id) continue;  // stale entry
    cur.id = top.new_id;
    right.alive = false;
    cur.next = right.next;
    if (cur.next >= 0) symbols[cur.next].prev = top.pos;
    if (cur.prev >= 0) {
      if (const auto* pm = merges_.find(symbols[cur.prev].id, cur.id)) {
        heap.push_back(Candidate{pm->rank, cur.prev, pm->new_id});
        std::push_heap(heap.begin(), heap.end(), CandidateAfter{});
      }
    }
    if (cur.next >= 0) {
      if (const auto* nm = merges_.find(cur.id, symbols[cur.next].id)) {
        heap.push_back(Candidate{nm->rank, top.pos, nm->new_id});
        std::push_heap(heap.begin(), heap.end(), CandidateAfter{});
      }
    }
  }
  for (const auto& s : symbols)
    if (s.alive) out.push_back(s.id);
}

}  // namespace hipformers::tok
