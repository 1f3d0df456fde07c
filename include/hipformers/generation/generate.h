// Autoregressive generation over CausalLM: a KV cache per sequence (several
// prompts of different lengths need no padding), greedy or sampled selection
// (sampling.h), EOS / stop-string / length stopping, and a per-token callback.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hipformers/generation/sampling.h"
#include "hipformers/io/config.h"
#include "hipformers/models/causal_lm.h"
#include "hipformers/tokenizer/tokenizer.h"

namespace hipformers {

// Unset fields come from the model's generation_config.json, as in
// Transformers' model.generate(**kwargs).
struct GenerationOptions {
  std::optional<int64_t> max_new_tokens;  // default: the file's max_new_tokens, else max_length (20) - prompt
  int64_t min_new_tokens = 0;             // EOS is masked until this many tokens exist
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  uint64_t seed = 0;
  std::optional<std::vector<int64_t>> eos_token_ids;  // overrides the file's
  std::vector<std::string> stop_strings;              // needs a tokenizer
  // Called for every generated token (sequence index, token id); return false to stop that sequence.
  std::function<bool(std::size_t, int32_t)> on_token;
};

enum class StopReason { kEos, kMaxNewTokens, kStopString, kCallback, kMaxPositions };
const char* stop_reason_name(StopReason reason);

struct GeneratedSequence {
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;  // including the EOS token when one ended it
  StopReason stop_reason = StopReason::kMaxNewTokens;
};

// Generates a continuation of every prompt. `tokenizer` is needed only for
// stop strings. Errors: an empty prompt, a prompt longer than
// max_position_embeddings, an id out of the vocabulary, invalid sampling values.
std::vector<GeneratedSequence> generate(const CausalLM& model, const GenerationConfig& defaults,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        const GenerationOptions& options, const Tokenizer* tokenizer = nullptr);

// The SamplingParams `options` resolve to over `defaults` (validated).
SamplingParams resolve_sampling(const GenerationConfig& defaults, const GenerationOptions& options);

}  // namespace hipformers
