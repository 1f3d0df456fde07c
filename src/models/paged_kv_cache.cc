#include "hipformers/models/paged_kv_cache.h"

#include <algorithm>
#include <string>

#include "hipformers/core/error.h"
#include "hipformers/models/causal_lm.h"
#include "hipformers/runtime/allocator.h"

namespace hipformers {
namespace {

DType cache_dtype(const CausalLM& model) { return model.device().is_gpu() ? model.dtype() : DType::kF32; }

}  // namespace

std::size_t PagedKVCache::page_bytes(const CausalLM& model) {
  const ModelConfig& c = model.config();
  return static_cast<std::size_t>(2 * c.num_hidden_layers * c.num_key_value_heads * kernels::kKVPageSize *
                                  c.head_dim) *
         dtype_size(cache_dtype(model));
}

PagedKVCache::PagedKVCache(const CausalLM& model, int64_t num_pages) : num_pages_(num_pages) {
  if (num_pages <= 0) throw_invalid("a paged KV cache needs at least one page, got " + std::to_string(num_pages));
  if (num_pages > INT32_MAX) throw_invalid("too many KV cache pages: " + std::to_string(num_pages));
  const ModelConfig& c = model.config();
  const Shape shape{num_pages, c.num_key_value_heads, kernels::kKVPageSize, c.head_dim};
  const DType dtype = cache_dtype(model);
  layers.reserve(static_cast<std::size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    layers.push_back({empty_tensor(shape, dtype, model.device()), empty_tensor(shape, dtype, model.device())});
  free_.resize(static_cast<std::size_t>(num_pages));
  for (int64_t i = 0; i < num_pages; ++i) free_[static_cast<std::size_t>(i)] = static_cast<int32_t>(num_pages - 1 - i);
  in_use_.assign(static_cast<std::size_t>(num_pages), false);
}

std::vector<int32_t> PagedKVCache::allocate(int64_t n) {
  if (n < 0) throw_invalid("cannot allocate " + std::to_string(n) + " KV cache pages");
  if (n > free_pages())
    throw_error(ErrorKind::kOutOfMemory, "KV cache full: " + std::to_string(n) + " pages wanted, " +
                                             std::to_string(free_pages()) + " of " + std::to_string(num_pages_) +
                                             " free");
  std::vector<int32_t> pages;
  pages.reserve(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    pages.push_back(free_.back());
    in_use_[static_cast<std::size_t>(free_.back())] = true;
    free_.pop_back();
  }
  return pages;
}

void PagedKVCache::release(std::span<const int32_t> pages) {
  // All or nothing: a bad or repeated id leaves every page where it was.
  std::vector<bool> seen(static_cast<std::size_t>(num_pages_), false);
  for (int32_t p : pages) {
    if (p < 0 || p >= num_pages_ || !in_use_[static_cast<std::size_t>(p)] || seen[static_cast<std::size_t>(p)])
      throw_invalid("KV cache page " + std::to_string(p) + " is not in use");
    seen[static_cast<std::size_t>(p)] = true;
  }
  for (int32_t p : pages) {
    in_use_[static_cast<std::size_t>(p)] = false;
    free_.push_back(p);
  }
  std::sort(free_.begin(), free_.end(), std::greater<int32_t>());
}

}  // namespace hipformers
