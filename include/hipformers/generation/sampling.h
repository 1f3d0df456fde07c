// Logits processors and token selection, in Transformers' order:
// repetition penalty -> (min_new_tokens EOS mask) -> temperature -> top_k ->
// top_p -> min_p -> argmax (greedy) or a draw from softmax (sampling).
// Each processor edits one row of logits in place; removed tokens become -inf.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace hipformers {

struct SamplingParams {
  bool do_sample = false;
  double temperature = 1.0;         // sampling only
  int64_t top_k = 0;                // 0 = off; sampling only
  double top_p = 1.0;               // 1 = off; sampling only
  double min_p = 0.0;               // 0 = off; sampling only
  double repetition_penalty = 1.0;  // 1 = off; greedy and sampling
};

// Error(kInvalidInput) naming the parameter for a value Transformers rejects
// (temperature <= 0, top_p outside (0, 1], min_p outside [0, 1], penalty <= 0, top_k < 0).
void validate(const SamplingParams& params);

// For every distinct token in `context`: logit < 0 ? logit * penalty : logit / penalty.
void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> context, double penalty);
void apply_temperature(std::span<float> logits, double temperature);
// Keeps every logit >= the k-th largest (ties at the boundary survive, as torch.topk + '<' does).
void apply_top_k(std::span<float> logits, int64_t top_k);
// Keeps the smallest set of most likely tokens whose probability reaches top_p
// (removes tokens whose ascending cumulative probability is <= 1 - top_p; the top one always stays).
void apply_top_p(std::span<float> logits, double top_p);
// Removes tokens whose probability is below min_p times the top probability.
void apply_min_p(std::span<float> logits, double min_p);

// Runs the processors of `params` on `logits` and picks the next token with
// `rng` when sampling. `context` is the prompt plus what was generated.
int32_t select_next_token(std::span<float> logits, std::span<const int32_t> context, const SamplingParams& params,
                          std::mt19937_64& rng);

}  // namespace hipformers
