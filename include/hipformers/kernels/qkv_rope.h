// The attention inputs of one decoder layer in one pass, from the fused
// q|k|v projection output:
//   q = rope(q_norm(q))           -> q_out
//   k = rope(k_norm(k)), v        -> the paged KV cache at each token's position
// q_norm/k_norm are Qwen3's per-head RMSNorms (absent elsewhere). Rounding is
// exactly that of running rms_norm, apply_rope and a cache write one after
// another (rms_norm.h, rotary.h), so fused and unfused paths agree bit for bit
// on the CPU. Backward (training) goes through the unfused ops.
#pragma once

#include <cstdint>

#include "hipformers/core/tensor.h"
#include "hipformers/kernels/paged_attention.h"

namespace hipformers::kernels {

// qkv [num_tokens, (heads + 2 * kv_heads) * head_dim], per row q | k | v.
// q_norm, k_norm [head_dim] or both undefined. inv_freq F32 [head_dim / 2] on
// the same device (RopeFrequencies::inv_freq uploaded once), scaled by
// attention_scaling as in rotary.h. Uses batch.positions, batch.token_seq and
// batch.block_table. Enqueues GPU work only (graph-capturable).
void qkv_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, double eps,
                    const Tensor& inv_freq, float attention_scaling, const PagedBatch& batch, int64_t heads,
                    int64_t kv_heads, DType dtype, PagedKVLayer& cache, Tensor& q_out);

// qkv_rope_write(..., q_out) then paged_attention(q_out, ..., out, scratch),
// with the same results bit for bit. On a GPU, for a decode batch (every
// sequence brings one token), one kernel does both: each attention block
// norms and rotates its own query heads, and the blocks whose key range
// holds the new token also its key, in their prologue, using the new k/v
// from shared memory and writing them to the cache (q_out is not written).
// That saves a launch and a round trip through memory per layer and step.
// Elsewhere (CPU, prefill, spec.rope_in_attention false, or
// HIPFORMERS_DISABLE_FUSED_QKV_ATTENTION=1) the two ops run in turn. spec.heads / kv_heads / dtype stand for the
// arguments qkv_rope_write takes separately.
void qkv_rope_paged_attention(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, double eps,
                              const Tensor& inv_freq, float attention_scaling, const PagedBatch& batch,
                              const AttentionSpec& spec, PagedKVLayer& cache, Tensor& q_out, Tensor& out,
                              Tensor* scratch);

}  // namespace hipformers::kernels
