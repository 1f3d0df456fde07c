// Rotary position embeddings (RoPE), rotate_half layout (Llama, Qwen, Mistral):
// for pair (i, i + D/2) of a head vector at position p with angle a = p * inv_freq[i]:
//   y[i]       = x[i] * cos(a) * s - x[i + D/2] * sin(a) * s
//   y[i + D/2] = x[i + D/2] * cos(a) * s + x[i] * sin(a) * s
// where s is the attention scaling (1 except yarn). The frequencies follow
// Transformers' ROPE_INIT_FUNCTIONS for default, linear, dynamic (NTK), llama3
// and yarn. Backward is the same rotation by -a.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hipformers/core/tensor.h"

namespace hipformers::kernels {

struct RopeSpec {
  enum Kind { kDefault, kLinear, kDynamic, kLlama3, kYarn };
  Kind kind = kDefault;
  double theta = 10000.0;
  int64_t head_dim = 0;                 // rotary dim (partial rotary is not supported)
  int64_t max_position_embeddings = 0;  // dynamic, yarn default
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  int64_t original_max_position_embeddings = 0;           // llama3, yarn
  double beta_fast = 32.0, beta_slow = 1.0;               // yarn
  double yarn_attention_factor = 1.0;                     // yarn: already resolved (mscale rules)
  bool truncate = true;                                   // yarn
};

struct RopeFrequencies {
  std::vector<float> inv_freq;  // head_dim / 2 entries, as torch holds them (fp32)
  float attention_scaling = 1.0f;
};

// inv_freq for a sequence of `seq_len` positions (only dynamic depends on it:
// the NTK base grows once seq_len exceeds max_position_embeddings).
RopeFrequencies rope_frequencies(const RopeSpec& spec, int64_t seq_len = 0);

// x: [T, heads, head_dim] (or [T, heads*head_dim]) F32, rotated in place;
// positions: T absolute positions. With a bf16/f16 `dtype`, cos/sin and every
// product are rounded as torch does for x * cos + rotate_half(x) * sin.
void apply_rope(Tensor& x, int64_t heads, std::span<const int64_t> positions, const RopeFrequencies& freqs,
                DType dtype);
// dx from dy (in place): the inverse rotation. Ignores dtype rounding.
void apply_rope_backward(Tensor& dy, int64_t heads, std::span<const int64_t> positions,
                         const RopeFrequencies& freqs);

}  // namespace hipformers::kernels
