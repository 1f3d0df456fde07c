// Causal attention over a paged KV cache, for a batch of sequences at once
// (continuous batching: each sequence brings any number of new tokens, 1 in
// decode, the whole prompt in prefill).
//
// Layout. Every layer owns two page pools, k and v, each
//   [num_pages, kv_heads, kKVPageSize, head_dim]   (storage dtype; F32 on the CPU)
// A sequence's token at position p lives in page block_table[b][p / kKVPageSize],
// slot p % kKVPageSize. Pages are shared by no two sequences.
//
// Math (per query token of sequence b at absolute position p, query head h,
// kv head h / (heads / kv_heads), visible keys j in [first, p] where first =
// max(0, p - window + 1) with a sliding window, else 0):
//   s_j = scale * q . k_j;   out = sum_j softmax(s)_j v_j
// with the sdpa rounding of attention.h (probabilities rounded to the dtype
// before p.v, output rounded once). Eager attention (materialised
// probabilities) stays on the contiguous-cache path of attention.h.
//
// Implementations: CPU reference (paged_attention_cpu.cc); GPU
// (paged_attention_gpu.cu) with a split-K ("flash-decoding") kernel when
// every sequence has one query, and a flash-attention prefill kernel
// otherwise (tensor cores on CUDA for 16-bit dtypes, a portable tiled
// kernel for F32 and for HIP).
#pragma once

#include <cstdint>

#include "hipformers/core/tensor.h"
#include "hipformers/kernels/attention.h"

namespace hipformers::kernels {

constexpr int64_t kKVPageSize = 64;  // tokens per page

// One layer's page pools (see the layout above).
struct PagedKVLayer {
  Tensor k;
  Tensor v;
};

// Where a step's tokens sit. All tensors I32 on the device of the pools (host
// tensors on the CPU). Tokens of sequence b are rows [query_start[b],
// query_start[b + 1]) of q/out and are the LAST tokens of that sequence, whose
// keys/values are already in the pages: positions seq_lens[b] - n_b ...
// seq_lens[b] - 1.
struct PagedBatch {
  int64_t num_seqs = 0;
  int64_t num_tokens = 0;
  // Host-known bounds used to size launches (a captured graph keeps them, so
  // they may exceed the actual values, never fall short).
  int64_t max_query_len = 0;  // >= max_b (query_start[b+1] - query_start[b])
  int64_t max_seq_len = 0;    // >= max_b seq_lens[b]; <= block_table.size(1) * kKVPageSize
  Tensor query_start;  // [num_seqs + 1]
  Tensor seq_lens;     // [num_seqs]
  Tensor positions;    // [num_tokens] absolute position of each token
  Tensor token_seq;    // [num_tokens] sequence index b of each token
  Tensor block_table;  // [num_seqs, max_pages_per_seq]
};

// F32 elements of scratch the GPU kernels need for this batch shape (split-K
// partial results and merge counters); 0 on the CPU. The caller allocates it
// once, zero-filled (a captured graph must reuse the same scratch); the
// kernels leave the counters zero again after every call.
int64_t paged_attention_scratch_elems(const PagedBatch& batch, const AttentionSpec& spec, const Device& device);
// The same for one scratch shared by every decode batch of up to max_seqs
// sequences under the bound max_seq_len (a graph per batch size replays
// over one scratch): launches of different shapes keep their merge counters
// and partials apart in it. At least paged_attention_scratch_elems() of each
// such batch.
int64_t paged_attention_shared_scratch_elems(int64_t max_seqs, int64_t max_seq_len, const AttentionSpec& spec,
                                             const Device& device);

// q, out [num_tokens, heads * head_dim]. `scratch` F32, zero-filled before
// its first use, with at least paged_attention_scratch_elems() elements (may
// be null when that is 0).
// spec.eager must be false. Enqueues GPU work only (no sync, no allocation),
// so it can be captured in a graph.
void paged_attention(const Tensor& q, const PagedBatch& batch, const PagedKVLayer& cache, const AttentionSpec& spec,
                     Tensor& out, Tensor* scratch);

}  // namespace hipformers::kernels
