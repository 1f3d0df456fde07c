// Causal scaled-dot-product attention over a KV cache, with grouped-query
// sharing (GQA/MQA: query head h reads kv head h / (heads / kv_heads)) and an
// optional sliding window (key j is visible to the query at position i when
// j <= i and i - j < window, Transformers' sliding_window mask).
//
//   s[j] = scale * q . k_j;  p = softmax(s over visible j);  out = sum_j p[j] v_j
//
// Two implementations with the same fp32 math:
//   eager: materialises the probabilities (can return them, as
//          output_attentions does) and, with a bf16/f16 dtype, rounds where
//          torch's eager_attention_forward does (q.k, * scale, softmax output,
//          p.v);
//   sdpa:  one pass per query row without storing probabilities (online
//          max/sum, like the fused kernels), rounding only its output.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "hipformers/core/tensor.h"

namespace hipformers::kernels {

// One layer's cache: k and v are [kv_heads, capacity, head_dim] F32, positions
// [0, length) filled.
struct KVCacheView {
  Tensor k;
  Tensor v;
  int64_t length = 0;
};

struct AttentionSpec {
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  float scale = 0;                       // usually head_dim^-0.5
  std::optional<int64_t> sliding_window; // nullopt: full causal
  DType dtype = DType::kF32;             // emulate this activation dtype's rounding
  bool eager = false;
  // flash_attention_3: where the GPU has them, kernels that use Hopper's own
  // instructions (the paged prefill's K/V by TMA tensor copies, sm_90+); the
  // results are those of the default kernels (same math, same order).
  bool hopper_kernels = false;
  // The batched (paged) path's kernel choices, from the registry
  // (use_kernels; docs/KERNELS.md). split_decode: every decode batch takes
  // the split-K kernel (Attention 'attention_paged_split'), not the wide one
  // where that applies. rope_in_attention: a decode step may norm and rotate
  // q/k and write the new K/V inside the attention kernel
  // (RotaryEmbedding 'rotary_gpu'); false: qkv_rope_write's own kernel runs
  // first ('rotary_qkv_write'). Same values either way for the RoPE choice;
  // the two decode kernels sum in different orders.
  bool split_decode = false;
  bool rope_in_attention = true;
};

// Copies k, v [T, kv_heads*head_dim] into the cache at positions
// [cache.length, cache.length + T) and advances length. Error if it overflows.
void kv_cache_append(KVCacheView& cache, const Tensor& k, const Tensor& v);

// q [T, heads*head_dim] at absolute `positions` (each < cache.length), out
// [T, heads*head_dim]. `probs`, if non-null and eager, receives
// [heads, T, cache.length] (zeros where masked).
void attention(const Tensor& q, std::span<const int64_t> positions, const KVCacheView& cache,
               const AttentionSpec& spec, Tensor& out, Tensor* probs = nullptr);

}  // namespace hipformers::kernels
