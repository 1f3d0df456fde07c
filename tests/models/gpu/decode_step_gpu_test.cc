// The persistent one-sequence decode step (kernels/decode_step.h) against
// the per-kernel step it replaces (HIPFORMERS_PERSISTENT_DECODE=0), which
// the batch-step and GPU kernel tests check against the CPU reference:
// logits of every decode step to bf16 rounding, the fused argmax exactly,
// greedy tokens, the split-K merge across pages (contexts past 64 and 128
// keys), q/k norm present and absent, head_dim 64 and 128, grouped query
// heads, a vocabulary that is not a multiple of the tile, and steps whose
// token comes from the previous step's argmax on the device; the splits
// merged where HIPFORMERS_PERSISTENT_MERGE says (o staging, attention), the
// ops' outputs exchanged as HIPFORMERS_PERSISTENT_EXCHANGE says (counters,
// flagged words, the two alternating on one workspace), the opt-in tile
// segments and K/V prefetch, and a hidden size that gives every block
// several o and down tiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/kernels/decode_step.h"
#include "hipformers/models/batch_step.h"
#include "hipformers/models/causal_lm.h"
#include "hipformers/models/paged_kv_cache.h"
#include "hipformers/runtime/device.h"
#include "tiny_model.h"

namespace hipformers {
namespace {

using testing::TinySpec;

bool have_gpu() { return gpu_count() > 0; }

// Projections scaled to keep activations near unit size (the tiny models'
// N(0, 0.3) weights grow them by 0.3 sqrt(in) per layer).
testing::TinyWeights unit_scale_weights(const TinySpec& spec, unsigned seed) {
  testing::TinyWeights w = testing::tiny_weights(spec, seed);
  for (auto& [name, sv] : w) {
    if (sv.first.size() != 2 || name.find("embed_tokens") != std::string::npos) continue;
    const float scale = 1.0f / (0.3f * std::sqrt(static_cast<float>(sv.first[1])));
    for (float& v : sv.second) v *= scale;
  }
  return w;
}

struct Run {
  std::vector<std::vector<float>> logits;  // per decode step
  std::vector<int32_t> next;               // the step's argmax (ws.next)
};

// Prefill `prompt`, then `steps` greedy decode steps; from step `chain_from`
// on, the token comes from the previous step's argmax on the device.
// alternate: the persistent steps switch between the flagged exchange (even
// steps) and the counters (odd) on one workspace.
Run decode(const CausalLM& model, const std::vector<int32_t>& prompt, int steps, int chain_from, const char* mode,
           bool alternate = false) {
  ::setenv("HIPFORMERS_PERSISTENT_DECODE", mode, 1);
  const int64_t total = static_cast<int64_t>(prompt.size()) + steps;
  PagedKVCache cache(model, PagedKVCache::pages_for(total) + 2);
  (void)cache.allocate(2);  // so the sequence does not start at page 0
  const std::vector<int32_t> pages = cache.allocate(PagedKVCache::pages_for(total));
  StepWorkspace ws(model, static_cast<int64_t>(prompt.size()), 1, total);
  const SequenceStep prefill[] = {{prompt, 0, pages}};
  model.prepare_step(ws, cache, prefill);
  model.forward_step(ws, cache, true);
  int32_t token = ws.next_ids()[0];
  Run run;
  for (int s = 0; s < steps; ++s) {
    const bool chained = s >= chain_from;
    const int32_t fed = chained ? 0 : token;  // chained steps must ignore the prepared id
    const SequenceStep step[] = {{std::span<const int32_t>(&fed, 1), static_cast<int64_t>(prompt.size()) + s, pages}};
    model.prepare_step(ws, cache, step);
    if (alternate) ::setenv("HIPFORMERS_PERSISTENT_EXCHANGE", s % 2 == 0 ? "flagged" : "counters", 1);
    model.forward_step(ws, cache, true, chained);
    run.logits.push_back(ws.logits_row_host(0));
    token = ws.next_ids()[0];
    run.next.push_back(token);
  }
  ::unsetenv("HIPFORMERS_PERSISTENT_DECODE");
  ::unsetenv("HIPFORMERS_PERSISTENT_EXCHANGE");
  return run;
}

// A tiny model of `spec` with unit-scale random weights, in bf16 on GPU 0.
CausalLM tiny_bf16_model(const TinySpec& spec, const std::string& name, unsigned seed) {
  const auto dir = testing::write_tiny_model(name, spec, unit_scale_weights(spec, seed));
  ModelLoadOptions options;
  options.dtype = DType::kBF16;
  options.device = Device::gpu(0);
  return CausalLM::from_pretrained(dir, options);
}

// A decode run against the per-kernel step's: every logit finite and within
// 3% of the largest |logit| of the reference, the fused argmax equal to
// argmax() of the logits it stored (first on ties), the greedy tokens equal.
void expect_run_matches(const Run& fast, const Run& ref, const std::string& name) {
  ASSERT_EQ(fast.logits.size(), ref.logits.size());
  for (std::size_t s = 0; s < fast.logits.size(); ++s) {
    const std::vector<float>& a = fast.logits[s];
    const std::vector<float>& b = ref.logits[s];
    ASSERT_EQ(a.size(), b.size());
    float diff = 0, scale = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(std::isfinite(a[i])) << name << " step " << s << " logit " << i;
      diff = std::max(diff, std::fabs(a[i] - b[i]));
      scale = std::max(scale, std::fabs(b[i]));
    }
    EXPECT_LE(diff, 3e-2f * scale) << name << " step " << s;
    EXPECT_EQ(fast.next[s], std::max_element(a.begin(), a.end()) - a.begin()) << name << " step " << s;
    EXPECT_EQ(fast.next[s], ref.next[s]) << name << " greedy token of step " << s;
  }
}

void expect_persistent_matches(const TinySpec& spec, const std::string& name, int prompt_len, int steps) {
  const CausalLM model = tiny_bf16_model(spec, name, 11);
  std::vector<int32_t> prompt(static_cast<std::size_t>(prompt_len));
  for (int i = 0; i < prompt_len; ++i) prompt[static_cast<std::size_t>(i)] = static_cast<int32_t>((i * 37 + 5) % spec.vocab);

  const Run ref = decode(model, prompt, steps, steps / 2, "0");
  // the splits merged in the o projection's staging and in the attention op
  // by each kv head's last split (the counters' choice; the flagged exchange
  // always merges in the attention op); the ops' outputs exchanged as
  // flagged words (the default) or through the done counters
  // (and the two exchanges alternating step by step on one workspace, and
  // the flagged one with each block sleeping 0-4 us before each op, so the
  // blocks meet the ops in many relative orders); with split attention items
  // and with whole-head attention (the default while the pages fit the ring;
  // splits again past it; with a kv head's query heads over several blocks)
  struct Variant {
    std::vector<std::pair<const char*, const char*>> env;  // set for the run
    bool alternate = false;                                 // decode()'s
  };
  const Variant variants[] = {
      {{{"HIPFORMERS_PERSISTENT_ATTENTION", "split"},
        {"HIPFORMERS_PERSISTENT_EXCHANGE", "counters"},
        {"HIPFORMERS_PERSISTENT_MERGE", "o"}}},
      {{{"HIPFORMERS_PERSISTENT_ATTENTION", "split"},
        {"HIPFORMERS_PERSISTENT_EXCHANGE", "counters"},
        {"HIPFORMERS_PERSISTENT_MERGE", "attention"}}},
      {{{"HIPFORMERS_PERSISTENT_ATTENTION", "split"}}},  // the flagged exchange (the default)
      {{{"HIPFORMERS_PERSISTENT_ATTENTION", "split"}, {"HIPFORMERS_PERSISTENT_JITTER", "1"}}},
      {{{"HIPFORMERS_PERSISTENT_EXCHANGE", "counters"}}},  // whole heads (the default), counters
      {{}},                                                // whole heads, flagged: the defaults
      {{{"HIPFORMERS_PERSISTENT_JITTER", "1"}}},
      // a kv head's query heads in one block, and over 2 blocks (the
      // default: one head a block; a count that does not divide them is
      // ignored)
      {{{"HIPFORMERS_PERSISTENT_HEAD_PARTS", "1"}}},
      {{{"HIPFORMERS_PERSISTENT_HEAD_PARTS", "2"}, {"HIPFORMERS_PERSISTENT_JITTER", "1"}}},
      // RoPE's coefficients computed in every layer (the default keeps
      // layer 0's)
      {{{"HIPFORMERS_PERSISTENT_ROPE_ONCE", "0"}}},
      // tiles of fewer than 8 rows as input segments (the Llama spec's
      // down: 4 rows; the wide spec's q|k|v, gate|up, lm_head: 2), and the
      // attention's pages asked into L2 ahead (both opt-in)
      {{{"HIPFORMERS_PERSISTENT_TILE_SEGMENTS", "1"}}},
      {{{"HIPFORMERS_PERSISTENT_KV_PREFETCH", "3"}, {"HIPFORMERS_PERSISTENT_TILE_SEGMENTS", "1"}}},
      {{}, true}};
  for (const Variant& variant : variants) {
    std::string label = variant.alternate ? "exchanges alternating" : "";
    for (const auto& [variable, value] : variant.env) {
      label += std::string(label.empty() ? "" : " ") + variable + "=" + value;
      ::setenv(variable, value, 1);
    }
    SCOPED_TRACE(label);
    const Run fast = decode(model, prompt, steps, steps / 2, "require", variant.alternate);
    for (const auto& [variable, value] : variant.env) ::unsetenv(variable);
    expect_run_matches(fast, ref, name);
  }
}

TEST(PersistentDecodeStep, Qwen3HeadDim128MatchesPerKernelStep) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  // a vocabulary that is not a multiple of the 8-row tile
  const TinySpec spec{.vocab = 1003, .hidden = 256, .intermediate = 384, .layers = 3, .heads = 8, .kv_heads = 2,
                      .head_dim = 128, .max_positions = 512};
  // 120 prompt tokens + 20 steps: the context crosses pages at 128 (splits merge)
  expect_persistent_matches(spec, "pd_qwen3_128", 120, 20);
}

TEST(PersistentDecodeStep, WholeHeadsGiveWayToSplitsPastTheRing) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  const TinySpec spec{.vocab = 1003, .hidden = 256, .intermediate = 384, .layers = 3, .heads = 8, .kv_heads = 2,
                      .head_dim = 128, .max_positions = 512};
  // 250 + 12: 4 pages (whole heads fit the 8-stage ring), then 5 (splits)
  expect_persistent_matches(spec, "pd_whole_to_split", 250, 12);
}

// The default (HIPFORMERS_PERSISTENT_DECODE unset): the persistent step
// while whole heads fit, then the per-kernel step, in one sequence.
TEST(PersistentDecodeStep, DefaultGivesWayToThePerKernelStepPastWholeHeads) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  const TinySpec spec{.vocab = 1003, .hidden = 256, .intermediate = 384, .layers = 3, .heads = 8, .kv_heads = 2,
                      .head_dim = 128, .max_positions = 512};
  const CausalLM model = tiny_bf16_model(spec, "pd_default_switch", 13);
  const int64_t whole = kernels::decode_step_whole_head_keys(model.device());
  ASSERT_GT(whole, 8);
  // prompt + steps cross `whole`: steps before it persistent, after it not
  const int prompt_len = static_cast<int>(whole) - 6, steps = 12;
  std::vector<int32_t> prompt(static_cast<std::size_t>(prompt_len));
  for (int i = 0; i < prompt_len; ++i) prompt[static_cast<std::size_t>(i)] = static_cast<int32_t>((i * 53 + 7) % spec.vocab);
  const auto ref = decode(model, prompt, steps, steps / 2, "0");
  const auto fast = decode(model, prompt, steps, steps / 2, "short");
  expect_run_matches(fast, ref, "pd_default_switch");
}

TEST(PersistentDecodeStep, LongContextMergesSplitsInChunks) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  const TinySpec spec{.vocab = 700, .hidden = 128, .intermediate = 256, .layers = 2, .heads = 8, .kv_heads = 4,
                      .head_dim = 128, .max_positions = 1024};
  // 700 keys = 11 pages: the o projection's staging merges them in chunks
  expect_persistent_matches(spec, "pd_long", 690, 12);
}

TEST(PersistentDecodeStep, LlamaHeadDim64NoQkNormMatchesPerKernelStep) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  const TinySpec spec{.model_type = "llama", .vocab = 512, .hidden = 512, .intermediate = 1344, .layers = 2,
                      .heads = 8, .kv_heads = 8, .head_dim = 64, .max_positions = 512};
  expect_persistent_matches(spec, "pd_llama_64", 30, 50);
}

TEST(PersistentDecodeStep, WideHiddenGivesBlocksSeveralTiles) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  // the o and down projections: 512 tiles of 8 rows, several a block
  const TinySpec spec{.vocab = 600, .hidden = 4096, .intermediate = 1024, .layers = 2, .heads = 8, .kv_heads = 2,
                      .head_dim = 128, .max_positions = 256};
  expect_persistent_matches(spec, "pd_wide", 70, 10);
}

TEST(PersistentDecodeStep, RequiredButUnsupportedIsAClearError) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  TinySpec spec;  // head_dim 16: not a size the persistent step takes
  const CausalLM model = tiny_bf16_model(spec, "pd_unsupported", 3);
  const std::vector<int32_t> prompt = {1, 2, 3};
  try {
    (void)decode(model, prompt, 2, 2, "require");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
  }
  ::unsetenv("HIPFORMERS_PERSISTENT_DECODE");
}

}  // namespace
}  // namespace hipformers
