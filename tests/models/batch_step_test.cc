// The batched paged forward (batch_step.h) against the reference forward():
// one prompt, several prompts of different lengths in one prefill step,
// chunked prefill, mixed decode steps, the bf16-emulated dtype, qwen2 bias,
// sliding windows; and the step's argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "hipformers/core/error.h"
#include "hipformers/kernels/registry.h"
#include "hipformers/models/causal_lm.h"
#include "test_util.h"
#include "tiny_model.h"

namespace hipformers {
namespace {

using testing::TinySpec;

CausalLM load(const TinySpec& spec, const std::string& name, std::optional<DType> dtype = std::nullopt) {
  const auto dir = testing::write_tiny_model(name, spec, testing::tiny_weights(spec, 7));
  ModelLoadOptions options;
  options.dtype = dtype;
  return CausalLM::from_pretrained(dir, options);
}

std::vector<int32_t> tokens(int64_t n, int64_t vocab, int seed) {
  std::vector<int32_t> t(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = static_cast<int32_t>((i * 7 + seed * 13 + 3) % vocab);
  return t;
}

// Reference logits of every position of `ids`.
Tensor reference(const CausalLM& model, const std::vector<int32_t>& ids) {
  KVCache cache = model.new_cache(static_cast<int64_t>(ids.size()));
  return model.forward(ids, cache, true);
}

float max_rel(const float* a, const float* b, int64_t n) {
  float diff = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    ref = std::max(ref, std::fabs(b[i]));
  }
  return diff / std::max(ref, 1e-30f);
}

// Runs `seqs` through the batched path: prefill in chunks of `chunk` tokens
// (all sequences packed into each step), then returns every position's logits.
std::vector<Tensor> batched_logits(const CausalLM& model, const std::vector<std::vector<int32_t>>& seqs,
                                   int64_t chunk) {
  int64_t longest = 0, total = 0;
  for (const auto& s : seqs) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(s.size()));
    total += PagedKVCache::pages_for(static_cast<int64_t>(s.size()));
  }
  PagedKVCache cache(model, total + 3);
  (void)cache.allocate(3);  // so sequences do not start at page 0
  std::vector<std::vector<int32_t>> pages;
  for (auto it = seqs.rbegin(); it != seqs.rend(); ++it)  // allocation order differs from batch order
    pages.insert(pages.begin(), cache.allocate(PagedKVCache::pages_for(static_cast<int64_t>(it->size()))));
  const auto B = static_cast<int64_t>(seqs.size());
  StepWorkspace ws(model, chunk * B, B, longest, true);
  std::vector<Tensor> out;
  for (const auto& s : seqs) out.push_back(Tensor::empty(Shape{static_cast<int64_t>(s.size()), model.config().vocab_size}, DType::kF32));
  for (int64_t start = 0; start < longest; start += chunk) {
    std::vector<SequenceStep> steps;
    std::vector<std::size_t> which;
    for (std::size_t b = 0; b < seqs.size(); ++b) {
      const auto len = static_cast<int64_t>(seqs[b].size());
      if (start >= len) continue;
      const int64_t n = std::min(chunk, len - start);
      steps.push_back({std::span<const int32_t>(seqs[b]).subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(n)),
                       start, pages[b]});
      which.push_back(b);
    }
    model.prepare_step(ws, cache, steps, true);
    model.forward_step(ws, cache, false);
    Tensor logits = ws.logits_host();
    int64_t row = 0;
    const int64_t V = model.config().vocab_size;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const auto n = static_cast<int64_t>(steps[i].tokens.size());
      std::copy_n(logits.data<float>() + row * V, n * V, out[which[i]].mutable_data<float>() + start * V);
      row += n;
    }
  }
  return out;
}

void expect_matches_reference(const CausalLM& model, const std::vector<std::vector<int32_t>>& seqs, int64_t chunk,
                              float tol, const std::string& what) {
  const std::vector<Tensor> got = batched_logits(model, seqs, chunk);
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    const Tensor want = reference(model, seqs[b]);
    EXPECT_LE(max_rel(got[b].data<float>(), want.data<float>(), want.numel()), tol) << what << " sequence " << b;
  }
}

TEST(BatchStep, OnePromptMatchesReference) {
  TinySpec spec;
  const CausalLM model = load(spec, "bs_one");
  expect_matches_reference(model, {tokens(37, spec.vocab, 1)}, 64, 1e-5f, "one prompt");
}

TEST(BatchStep, RaggedPromptsChunkedAndDecodeMatchReference) {
  TinySpec spec;
  spec.max_positions = 256;
  const CausalLM model = load(spec, "bs_ragged");
  const std::vector<std::vector<int32_t>> seqs = {tokens(1, spec.vocab, 1), tokens(70, spec.vocab, 2),
                                                  tokens(129, spec.vocab, 3), tokens(5, spec.vocab, 4)};
  expect_matches_reference(model, seqs, 200, 1e-5f, "one prefill step");
  expect_matches_reference(model, seqs, 17, 1e-5f, "chunks of 17");
  expect_matches_reference(model, seqs, 1, 1e-5f, "token by token (decode steps)");
}

TEST(BatchStep, Bf16EmulationQwen2BiasAndSlidingWindow) {
  {
    TinySpec spec;
    const CausalLM model = load(spec, "bs_bf16", DType::kBF16);
    expect_matches_reference(model, {tokens(40, spec.vocab, 5), tokens(9, spec.vocab, 6)}, 16, 2e-2f, "bf16");
  }
  {
    TinySpec spec;
    spec.model_type = "qwen2";
    spec.bias = true;
    const CausalLM model = load(spec, "bs_qwen2");
    expect_matches_reference(model, {tokens(33, spec.vocab, 7), tokens(3, spec.vocab, 8)}, 8, 1e-5f, "qwen2 bias");
  }
  {
    TinySpec spec;
    spec.model_type = "mistral";
    spec.sliding_window = 8;
    const CausalLM model = load(spec, "bs_window");
    expect_matches_reference(model, {tokens(50, spec.vocab, 9), tokens(20, spec.vocab, 10)}, 7, 1e-5f, "window");
  }
}

// The folded decode variants (RMSNorm / SwiGLU inside the projections),
// chosen per device through use_kernels + a KernelConfig, give the
// reference's logits for decode steps (<= 8 tokens) and ordinary prefill.
TEST(BatchStep, FoldedNormAndSwigluMatchReference) {
  TinySpec spec;
  spec.max_positions = 256;
  const auto dir = testing::write_tiny_model("bs_folded", spec, testing::tiny_weights(spec, 7));
  for (int variant = 0; variant < 3; ++variant) {  // norm, SwiGLU, both
    kernels::KernelConfig config;
    if (variant != 1) config.set(kernels::LayerKind::kRMSNorm, "cpu", "rms_norm_in_projection");
    if (variant != 0) config.set(kernels::LayerKind::kSiLUAndMul, "cpu", "silu_and_mul_in_projection");
    for (DType dt : {DType::kF32, DType::kBF16}) {
      ModelLoadOptions options;
      options.dtype = dt;
      options.use_kernels = true;
      options.kernel_config = config;
      const CausalLM model = CausalLM::from_pretrained(dir, options);
      const std::vector<std::vector<int32_t>> seqs = {tokens(20, spec.vocab, 1), tokens(7, spec.vocab, 2)};
      // chunks of 3 tokens x 2 sequences = 6 tokens per step: the folded path
      expect_matches_reference(model, seqs, 3, dt == DType::kF32 ? 1e-5f : 2e-2f,
                               "folded variant " + std::to_string(variant));
    }
  }
}

TEST(BatchStep, ArgmaxOnTheStepMatchesHostArgmax) {
  TinySpec spec;
  const CausalLM model = load(spec, "bs_argmax");
  const auto a = tokens(12, spec.vocab, 1), b = tokens(30, spec.vocab, 2);
  PagedKVCache cache(model, 4);
  const auto pa = cache.allocate(1), pb = cache.allocate(1);
  StepWorkspace ws(model, 64, 2, 64);
  const SequenceStep steps[] = {{a, 0, pa}, {b, 0, pb}};
  model.prepare_step(ws, cache, steps);
  model.forward_step(ws, cache, true);
  const std::vector<int32_t> ids = ws.next_ids();
  const Tensor logits = ws.logits_host();
  ASSERT_EQ(ids.size(), 2u);
  for (int64_t r = 0; r < 2; ++r) {
    const float* row = logits.data<float>() + r * spec.vocab;
    EXPECT_EQ(ids[static_cast<std::size_t>(r)], std::max_element(row, row + spec.vocab) - row);
  }
  // The last rows of each sequence are what forward() gives for its last token.
  const Tensor ref = reference(model, b);
  EXPECT_LE(max_rel(logits.data<float>() + spec.vocab, ref.data<float>() + 29 * spec.vocab, spec.vocab), 1e-5f);
}

TEST(BatchStep, BadStepsAreClearErrors) {
  TinySpec spec;
  const CausalLM model = load(spec, "bs_errors");
  PagedKVCache cache(model, 4);
  const auto pages = cache.allocate(1);
  StepWorkspace ws(model, 16, 2, 100);
  const std::vector<int32_t> ok = {1, 2, 3}, bad = {1, static_cast<int32_t>(spec.vocab)}, empty;
  auto error = [&](std::vector<SequenceStep> steps) {
    return testing::error_of([&] { model.prepare_step(ws, cache, steps); }).second;
  };
  EXPECT_NE(error({{bad, 0, pages}}).find("out of range for the model's vocabulary"), std::string::npos);
  EXPECT_NE(error({{empty, 0, pages}}).find("brings no tokens"), std::string::npos);
  EXPECT_NE(error({{ok, 62, pages}}).find("needs 2 KV pages"), std::string::npos);
  EXPECT_NE(error({{ok, 0, pages}, {ok, 0, pages}, {ok, 0, pages}}).find("exceeds the workspace"), std::string::npos);
  EXPECT_NE(error({{ok, 98, pages}}).find("beyond the workspace"), std::string::npos);
  const std::vector<int32_t> wild = {7};
  EXPECT_NE(error({{ok, 0, wild}}).find("out of range"), std::string::npos);
  EXPECT_NE(testing::error_of([&] { (void)cache.allocate(4); }).second.find("KV cache full"), std::string::npos);
  EXPECT_NE(testing::error_of([&] { cache.release(std::vector<int32_t>{3}); }).second.find("not in use"), std::string::npos);
  // All or nothing: a repeated id frees nothing.
  EXPECT_NE(testing::error_of([&] { cache.release(std::vector<int32_t>{pages[0], pages[0]}); }).second.find("not in use"),
            std::string::npos);
  EXPECT_EQ(cache.free_pages(), 3);
  EXPECT_NE(testing::error_of([&] { StepWorkspace(model, 8, 2, 1000); }).second.find("max_position_embeddings"),
            std::string::npos);
  // Eager attention stays on forward().
  ModelLoadOptions eager;
  eager.attn_implementation = AttnImplementation::kEager;
  const CausalLM e = CausalLM::from_pretrained(testing::write_tiny_model("bs_eager", spec, testing::tiny_weights(spec, 7)), eager);
  EXPECT_FALSE(e.supports_batched_steps());
}

}  // namespace
}  // namespace hipformers
