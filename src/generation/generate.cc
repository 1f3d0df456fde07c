#include "hipformers/generation/generate.h"

#include <algorithm>
#include <limits>
#include <random>

#include "hipformers/core/error.h"
#include "hipformers/generation/engine.h"
#include "hipformers/runtime/profiling.h"

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

namespace {

// Per-prompt limits shared by both paths.
struct PromptPlan {
  int64_t max_new = 0;
  bool clipped = false;  // max_new was cut at max_position_embeddings
};

PromptPlan plan_prompt(const ModelConfig& config, const GenerationConfig& defaults, const GenerationOptions& options,
                       const std::vector<int32_t>& prompt, std::size_t s) {
  const auto prompt_len = static_cast<int64_t>(prompt.size());
  if (prompt.empty()) throw_invalid("prompt " + std::to_string(s) + " is empty");
  if (prompt_len > config.max_position_embeddings)
    throw_invalid("prompt " + std::to_string(s) + " has " + std::to_string(prompt_len) +
                  " tokens, more than max_position_embeddings (" + std::to_string(config.max_position_embeddings) +
                  ")");
  for (std::size_t t = 0; t < prompt.size(); ++t)
    if (prompt[t] < 0 || prompt[t] >= config.vocab_size)
      throw_invalid("token id " + std::to_string(prompt[t]) + " at position " + std::to_string(t) +
                    " is out of range for the model's vocabulary of " + std::to_string(config.vocab_size));
  PromptPlan plan;
  plan.max_new = options.max_new_tokens
                     ? *options.max_new_tokens
                     : (defaults.max_new_tokens ? *defaults.max_new_tokens
                                                : std::max<int64_t>(0, defaults.max_length.value_or(20) - prompt_len));
  // Positions stop at max_position_embeddings (the rotary tables' range).
  const int64_t room = config.max_position_embeddings - prompt_len;
  plan.clipped = plan.max_new > room;
  plan.max_new = std::min(plan.max_new, room);
  return plan;
}

// Applies the stopping rules to a sequence that just received `next`;
// returns true when it is finished.
bool accept_token(GeneratedSequence& out, std::size_t s, int32_t next, int64_t max_new,
                  const std::vector<int64_t>& eos, const GenerationOptions& options, const Tokenizer* tokenizer) {
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
  if (!stop && !options.stop_strings.empty() && ends_with_stop_string(*tokenizer, out.generated, options.stop_strings)) {
    out.stop_reason = StopReason::kStopString;
    stop = true;
  }
  return stop || static_cast<int64_t>(out.generated.size()) == max_new;
}

// Masks EOS while fewer than min_new_tokens exist and picks the next token.
int32_t choose_token(std::span<float> row, const std::vector<int32_t>& context, int64_t generated,
                     const std::vector<int64_t>& eos, const GenerationOptions& options, const SamplingParams& sampling,
                     std::mt19937_64& rng) {
  if (generated < options.min_new_tokens)
    for (int64_t id : eos)
      if (id >= 0 && id < static_cast<int64_t>(row.size()))
        row[static_cast<std::size_t>(id)] = -std::numeric_limits<float>::infinity();
  return select_next_token(row, context, sampling, rng);
}

// Every sequence draws from its own generator, seeded from the user's seed and
// its index, so sampled output does not depend on how sequences are batched
// (sequence 0 uses the seed itself).
std::mt19937_64 sequence_rng(uint64_t seed, std::size_t s) {
  return std::mt19937_64(seed + static_cast<uint64_t>(s) * 0x9E3779B97F4A7C15ull);
}

// The continuous-batching path (engine.h): all prompts share the batch.
std::vector<GeneratedSequence> generate_batched(const CausalLM& model, const std::vector<std::vector<int32_t>>& prompts,
                                                const std::vector<PromptPlan>& plans, const SamplingParams& sampling,
                                                const std::vector<int64_t>& eos, const GenerationOptions& options,
                                                const Tokenizer* tokenizer) {
  std::vector<GeneratedSequence> results(prompts.size());
  EngineOptions engine_options;
  int64_t active = 0, longest = 0, pages = 0;
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    results[s].prompt = prompts[s];
    results[s].stop_reason = plans[s].clipped ? StopReason::kMaxPositions : StopReason::kMaxNewTokens;
    if (plans[s].max_new == 0) continue;
    const int64_t len = static_cast<int64_t>(prompts[s].size()) + plans[s].max_new;
    ++active;
    longest = std::max(longest, len);
    pages += PagedKVCache::pages_for(len);
  }
  if (active == 0) return results;
  engine_options.max_batch = std::min<int64_t>(active, 64);
  engine_options.max_seq_len = longest;
  // KV pages: every sequence's whole length if that fits in 80% of the memory
  // still available, else as many as do (at least one longest sequence);
  // sequences beyond it wait for pages (FIFO admission).
  const auto page_bytes = static_cast<double>(PagedKVCache::page_bytes(model));
  const auto affordable =
      static_cast<int64_t>(0.8 * static_cast<double>(available_memory(model.device())) / page_bytes);
  engine_options.kv_pages = std::min(pages, engine_options.max_batch * PagedKVCache::pages_for(longest));
  engine_options.kv_pages = std::max(std::min(engine_options.kv_pages, affordable), PagedKVCache::pages_for(longest));
  engine_options.max_prefill_tokens = std::min<int64_t>(4096, std::max<int64_t>(longest, engine_options.max_batch));
  Engine engine(model, engine_options);
  std::vector<std::size_t> prompt_of;  // engine sequence -> prompt index
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    if (plans[s].max_new == 0) continue;
    engine.add(prompts[s], plans[s].max_new);
    prompt_of.push_back(s);
  }
  std::vector<std::mt19937_64> rngs;
  for (std::size_t s = 0; s < prompts.size(); ++s) rngs.push_back(sequence_rng(options.seed, s));
  // Greedy without logits processors is an argmax the device can do.
  const bool device_argmax = !sampling.do_sample && sampling.repetition_penalty == 1.0 && options.min_new_tokens == 0;
  while (engine.has_work()) {
    const std::vector<Engine::StepResult> ready = engine.step(device_argmax);
    const std::vector<int32_t> ids = device_argmax ? engine.argmax_ids() : std::vector<int32_t>();
    for (const Engine::StepResult& r : ready) {
      const std::size_t s = prompt_of[static_cast<std::size_t>(r.sequence)];
      GeneratedSequence& out = results[s];
      int32_t next;
      if (device_argmax) {
        next = ids[static_cast<std::size_t>(r.row)];
      } else {
        std::vector<float> row = engine.logits_row(r.row);
        next = choose_token(row, engine.tokens(r.sequence), static_cast<int64_t>(out.generated.size()), eos, options,
                            sampling, rngs[s]);
      }
      if (accept_token(out, s, next, plans[s].max_new, eos, options, tokenizer)) engine.finish(r.sequence);
      else engine.append(r.sequence, next);
    }
  }
  return results;
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
  std::vector<PromptPlan> plans;
  for (std::size_t s = 0; s < prompts.size(); ++s) plans.push_back(plan_prompt(config, defaults, options, prompts[s], s));
  if (model.supports_batched_steps())
    return generate_batched(model, prompts, plans, sampling, eos, options, tokenizer);

  // The reference path (eager attention): one sequence after another over a contiguous KV cache.
  std::vector<GeneratedSequence> results;
  results.reserve(prompts.size());
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    const std::vector<int32_t>& prompt = prompts[s];
    const int64_t max_new = plans[s].max_new;
    GeneratedSequence out;
    out.prompt = prompt;
    out.stop_reason = plans[s].clipped ? StopReason::kMaxPositions : StopReason::kMaxNewTokens;
    if (max_new == 0) {
      results.push_back(std::move(out));
      continue;
    }
    std::mt19937_64 rng = sequence_rng(options.seed, s);
    KVCache cache = model.new_cache(static_cast<int64_t>(prompt.size()) + max_new);
    std::vector<int32_t> context = prompt;
    Tensor logits = model.forward(prompt, cache, false);
    while (true) {
      std::span<float> row(logits.mutable_data<float>(), static_cast<std::size_t>(config.vocab_size));
      const int32_t next = choose_token(row, context, static_cast<int64_t>(out.generated.size()), eos, options,
                                        sampling, rng);
      context.push_back(next);
      if (accept_token(out, s, next, max_new, eos, options, tokenizer)) break;
      const int32_t feed[1] = {next};
      logits = model.forward(feed, cache, false);
    }
    results.push_back(std::move(out));
  }
  return results;
}

}  // namespace hipformers
