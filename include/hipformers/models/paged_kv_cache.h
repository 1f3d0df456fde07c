// The KV cache of batched inference: fixed-size pages (kernels::kKVPageSize
// tokens) in one pool per layer, handed to sequences as they grow and taken
// back when they finish, so memory is bounded by the tokens actually cached
// rather than batch x max length, and a finished sequence's pages go straight
// to a waiting one (continuous batching). Layout: kernels/paged_attention.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hipformers/kernels/paged_attention.h"

namespace hipformers {

class CausalLM;

class PagedKVCache {
 public:
  // `num_pages` pages per layer on the model's device (storage dtype on a GPU,
  // F32 on the CPU). Error(kOutOfMemory) when they do not fit.
  PagedKVCache(const CausalLM& model, int64_t num_pages);

  static int64_t pages_for(int64_t tokens) { return (tokens + kernels::kKVPageSize - 1) / kernels::kKVPageSize; }
  // Bytes one page costs over all layers (k and v) for `model`.
  static std::size_t page_bytes(const CausalLM& model);

  int64_t num_pages() const { return num_pages_; }
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  // Takes `n` free pages (lowest ids first); Error(kOutOfMemory) if fewer are free.
  std::vector<int32_t> allocate(int64_t n);
  // Returns pages to the pool. Error(kInvalidInput) for an id out of range or not in use.
  void release(std::span<const int32_t> pages);

  std::vector<kernels::PagedKVLayer> layers;

 private:
  int64_t num_pages_ = 0;
  std::vector<int32_t> free_;  // kept sorted descending: back() is the lowest id
  std::vector<bool> in_use_;
};

}  // namespace hipformers
