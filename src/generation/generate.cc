#include "hipformers/generation/generate.h"

#include <algorithm>
#include <limits>
#include <random>

#include "hipformers/core/error.h"

namespace hipformers {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kEos: return "eos";
    case StopReason::kMaxNewTokens: return "max_new_tokens";
    case StopReason::kStopString: return "stop_string";
    case StopReason::kCallback: return "callback";
    case StopReason::kMaxPositions: return "max_position_embeddings";
  }
  return "unknown";
}

SamplingParams resolve_sampling(const GenerationConfig& d, const GenerationOptions& o) {
  SamplingParams p;
  p.do_sample = o.do_sample.value_or(d.do_sample);
  p.temperature = o.temperature.value_or(d.temperature);
  p.top_k = o.top_k.value_or(d.top_k);
  p.top_p = o.top_p.value_or(d.top_p);
  p.min_p = o.min_p.value_or(d.min_p);
  p.repetition_penalty = o.repetition_penalty.value_or(d.repetition_penalty);
  validate(p);
  return p;
}

namespace {

bool ends_with_stop_string(const Tokenizer& tokenizer, const std::vector<int32_t>& generated,
                           const std::vector<std::string>& stops) {
  // Decoding the whole continuation each step keeps multi-token characters and
  // stop strings spanning tokens right; continuations are short.
  const std::string text = tokenizer.decode(generated, false);
  for (const std::string& s : stops)
    if (!s.empty() && text.find(s) != std::string::npos) return true;
  return false;
}

}  // namespace

std::vector<GeneratedSequence> generate(const CausalLM& model, const GenerationConfig& defaults,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        const GenerationOptions& options, const Tokenizer* tokenizer) {
  const ModelConfig& config = model.config();
  const SamplingParams sampling = resolve_sampling(defaults, options);
  if (!options.stop_strings.empty() && !tokenizer) throw_invalid("stop strings need a tokenizer");
  if (options.min_new_tokens < 0) throw_invalid("min_new_tokens must be >= 0");
  if (options.max_new_tokens && *options.max_new_tokens < 0) throw_invalid("max_new_tokens must be >= 0");
  const std::vector<int64_t> eos = options.eos_token_ids.value_or(defaults.eos_token_ids);

  std::vector<GeneratedSequence> results;
  results.reserve(prompts.size());
  std::mt19937_64 rng(options.seed);
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    const std::vector<int32_t>& prompt = prompts[s];
    const auto prompt_len = static_cast<int64_t>(prompt.size());
    if (prompt.empty()) throw_invalid("prompt " + std::to_string(s) + " is empty");
    if (prompt_len > config.max_position_embeddings)
      throw_invalid("prompt " + std::to_string(s) + " has " + std::to_string(prompt_len) +
                    " tokens, more than max_position_embeddings (" +
                    std::to_string(config.max_position_embeddings) + ")");
    int64_t max_new = options.max_new_tokens
                          ? *options.max_new_tokens
                          : (defaults.max_new_tokens ? *defaults.max_new_tokens
                                                     : std::max<int64_t>(0, defaults.max_length.value_or(20) - prompt_len));
    // Positions stop at max_position_embeddings (the rotary tables' range).
    const int64_t room = config.max_position_embeddings - prompt_len;
    const bool clipped = max_new > room;
    max_new = std::min(max_new, room);

    GeneratedSequence out;
    out.prompt = prompt;
    out.stop_reason = clipped ? StopReason::kMaxPositions : StopReason::kMaxNewTokens;
    if (max_new == 0) {
      results.push_back(std::move(out));
      continue;
    }
    KVCache cache = model.new_cache(prompt_len + max_new);
    std::vector<int32_t> context = prompt;
    Tensor logits = model.forward(prompt, cache, false);
    for (int64_t step = 0; step < max_new; ++step) {
      std::span<float> row(logits.mutable_data<float>(), static_cast<std::size_t>(config.vocab_size));
      if (step < options.min_new_tokens)
        for (int64_t id : eos)
          if (id >= 0 && id < config.vocab_size) row[static_cast<std::size_t>(id)] = -std::numeric_limits<float>::infinity();
      const int32_t next = select_next_token(row, context, sampling, rng);
      context.push_back(next);
      out.generated.push_back(next);
      bool stop = false;
      if (std::find(eos.begin(), eos.end(), next) != eos.end()) {
        out.stop_reason = StopReason::kEos;
        stop = true;
      }
      if (options.on_token && !options.on_token(s, next) && !stop) {
        out.stop_reason = StopReason::kCallback;
        stop = true;
      }
      if (!stop && !options.stop_strings.empty() &&
          ends_with_stop_string(*tokenizer, out.generated, options.stop_strings)) {
        out.stop_reason = StopReason::kStopString;
        stop = true;
      }
      if (stop || step + 1 == max_new) break;
      const int32_t feed[1] = {next};
      logits = model.forward(feed, cache, false);
    }
    results.push_back(std::move(out));
  }
  return results;
}

}  // namespace hipformers
