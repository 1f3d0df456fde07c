// CausalLM's internals, shared by causal_lm.cc (loading, the reference
// forward) and batch_step.cc (the batched paged forward). Not installed.
#pragma once

#include <mutex>
#include <optional>
#include <vector>

#include "hipformers/models/causal_lm.h"
#include "hipformers/kernels/rotary.h"

namespace hipformers {

// One decoder layer's weights. q/k/v and gate/up are loaded into one matrix
// each (qkv_proj [q + 2 kv, hidden], gate_up_proj [2 intermediate, hidden]) so
// the batched path runs one GEMM where the reference runs three (or two);
// q_proj, k_proj, ... are row views into them, no extra memory.
struct DecoderLayer {
  Tensor qkv_proj, qkv_bias;          // qkv_bias undefined without q/k/v bias
  Tensor gate_up_proj, gate_up_bias;  // gate_up_bias undefined without MLP bias
  Tensor input_norm, post_attention_norm;
  Tensor q_proj, k_proj, v_proj, o_proj;
  Tensor q_bias, k_bias, v_bias, o_bias;  // undefined when absent
  Tensor q_norm, k_norm;                  // Qwen3 only
  Tensor gate_proj, up_proj, down_proj;
  Tensor gate_bias, up_bias, down_bias;
  std::optional<int64_t> sliding_window;
};

struct CausalLM::Impl {
  ModelConfig config;
  DType dtype = DType::kF32;
  Device device;
  AttnImplementation attn = AttnImplementation::kSdpa;
  kernels::AttentionBackend attention_backend;
  kernels::KernelSelection kernels;
  Tensor embed_tokens, final_norm, lm_head;
  std::vector<DecoderLayer> layers;
  kernels::RopeSpec rope;
  // Dynamic NTK state, as Transformers keeps it on the rotary module: the
  // frequencies grow with the longest sequence seen and reset once a short
  // one comes back. Guarded because forward() is const.
  mutable std::mutex rope_mutex;
  mutable kernels::RopeFrequencies rope_freqs;
  mutable int64_t rope_cached_len = 0;

  kernels::RopeFrequencies frequencies_for(int64_t seq_len) const {
    std::lock_guard<std::mutex> lock(rope_mutex);
    if (rope.kind == kernels::RopeSpec::kDynamic) {
      const int64_t original = rope.max_position_embeddings;
      if (seq_len > rope_cached_len) {
        rope_freqs = kernels::rope_frequencies(rope, seq_len);
        rope_cached_len = seq_len;
      }
      if (seq_len < original && rope_cached_len > original) {
        rope_freqs = kernels::rope_frequencies(rope, 0);
        rope_cached_len = original;
      }
    }
    return rope_freqs;
  }
};

}  // namespace hipformers
