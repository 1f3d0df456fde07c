// Decoder-only causal language models (Qwen3, Qwen2, Llama, Mistral) built
// from a ModelConfig and a checkpoint with Hugging Face tensor names:
//
//   embed -> N x [ h += attn(rms_norm(h)); h += mlp(rms_norm(h)) ] -> rms_norm -> lm_head
//   attn: q/k/v proj (+bias for Qwen2) -> per-head q_norm/k_norm (Qwen3) -> RoPE
//         -> causal GQA attention over the KV cache (sliding window for Mistral) -> o_proj
//   mlp:  down_proj(silu(gate_proj(x)) * up_proj(x))
//
// On the CPU activations run in fp32; with dtype bfloat16/float16 every op
// boundary is rounded to that dtype, reproducing what torch computes on the
// CPU in it. On a GPU (device cuda:N) weights, activations and the KV cache
// are stored in the model dtype (bf16 weights stay bf16) with fp32
// accumulation inside each kernel; logits come back to the host as F32.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "hipformers/core/tensor.h"
#include "hipformers/io/checkpoint.h"
#include "hipformers/io/config.h"
#include "hipformers/kernels/attention.h"
#include "hipformers/kernels/attention_backends.h"
#include "hipformers/kernels/registry.h"
#include "hipformers/models/batch_step.h"
#include "hipformers/models/paged_kv_cache.h"
#include "hipformers/runtime/device.h"

namespace hipformers {

enum class AttnImplementation { kSdpa, kEager };
// "sdpa" or "eager"; Error(kInvalidInput) listing both otherwise.
AttnImplementation parse_attn_implementation(std::string_view name);

struct ModelLoadOptions {
  std::optional<DType> dtype;  // nullopt = "auto": the config's dtype, float32 if it names none
  Device device = Device::cpu();
  AttnImplementation attn_implementation = AttnImplementation::kSdpa;
  // A backend resolved by kernels::resolve_attention_backend for this device;
  // when set it replaces attn_implementation (Error if resolved for another device).
  std::optional<kernels::AttentionBackend> attention_backend;
  // use_kernels: apply kernel_config's overrides of the registry's defaults.
  // Without it every layer runs its device's default (kernel_config must be empty).
  bool use_kernels = false;
  std::optional<kernels::KernelConfig> kernel_config;
};

// One sequence's keys and values for every layer.
class KVCache {
 public:
  KVCache() = default;
  // F32 on the host; on a GPU in the model's storage dtype (F32, BF16 or F16).
  KVCache(const ModelConfig& config, int64_t capacity, const Device& device = Device::cpu(),
          DType dtype = DType::kF32);
  int64_t length() const { return layers.empty() ? 0 : layers[0].length; }
  int64_t capacity() const { return capacity_; }
  std::vector<kernels::KVCacheView> layers;

 private:
  int64_t capacity_ = 0;
};

// What a forward pass keeps for a backward pass (training) or inspection.
// Inference passes nullptr and nothing is kept.
struct ForwardContext {
  bool keep_activations = false;   // fill `layers` with each op's inputs
  bool output_attentions = false;  // eager attention only: probabilities per layer [heads, T, S]
  struct Layer {
    Tensor input, attn_norm_out, attn_rstd, q, k, v, attn_out, mlp_norm_out, mlp_rstd, gate, up, act;
  };
  std::vector<Layer> layers;
  std::vector<Tensor> attentions;
  Tensor final_norm_input, final_rstd, final_hidden;
};

class CausalLM {
 public:
  // Reads config.json and the safetensors weights of `dir`.
  static CausalLM from_pretrained(const std::filesystem::path& dir, const ModelLoadOptions& options = {});
  // Missing tensor -> Error(kNotFound), wrong shape -> Error(kInvalidInput),
  // both naming the tensor with the expected and actual shape.
  static CausalLM from_checkpoint(const ModelConfig& config, const Checkpoint& checkpoint,
                                  const ModelLoadOptions& options = {});

  const ModelConfig& config() const;
  DType dtype() const;
  Device device() const;
  AttnImplementation attn_implementation() const;  // kEager when the Attention kernel is an eager one
  // What was resolved at load time: the attention backend and each layer's kernel.
  const kernels::AttentionBackend& attention_backend() const;
  const kernels::KernelSelection& kernels() const;

  KVCache new_cache(int64_t capacity) const;

  // Runs `ids` at positions [cache.length(), cache.length() + ids.size()),
  // appending their keys/values to `cache`. Returns F32 logits
  // [ids.size(), vocab] when `all_logits`, else [1, vocab] for the last token.
  // Error for an empty input, an id >= vocab, or positions beyond
  // max_position_embeddings or the cache capacity.
  Tensor forward(std::span<const int32_t> ids, KVCache& cache, bool all_logits,
                 ForwardContext* context = nullptr) const;

  // ---- The batched path over a paged KV cache (batch_step.h) ----
  // Whether this model runs it: every attention backend but eager (whose
  // materialised probabilities stay on forward()).
  bool supports_batched_steps() const;
  // Validates `steps` (ids in the vocabulary, positions within
  // max_position_embeddings and the workspace, pages in `cache` covering every
  // position) and copies their indices to the device in one transfer. Logits
  // are kept for every token with `all_logits` (the workspace must allow it),
  // else for each sequence's last token, in the order of `steps`.
  void prepare_step(StepWorkspace& ws, const PagedKVCache& cache, std::span<const SequenceStep> steps,
                    bool all_logits = false) const;
  // Enqueues the forward of the prepared step: writes the steps' keys and
  // values into `cache`, the logits into ws.logits and, with `argmax`, their
  // argmax into ws.next. Only enqueues device work (no allocation, copy or
  // sync), so a decode step can be captured as a graph and replayed after
  // another prepare_step with the same number of sequences and tokens.
  // With `ids_from_argmax` the step's token ids are not the prepared ones but
  // those the previous step's argmax left in ws.next, one per sequence in
  // the same order (a decode step chained on the device: engine.h's
  // lookahead); the step must bring one token per sequence.
  void forward_step(StepWorkspace& ws, PagedKVCache& cache, bool argmax, bool ids_from_argmax = false) const;
  // Whether forward_step will try the prepared step as one persistent kernel
  // (kernels/decode_step.h: one sequence, one token, and the context within
  // what HIPFORMERS_PERSISTENT_DECODE allows); a graph captured for a step
  // replays only for steps that answer the same (the engine keys on it).
  bool takes_persistent_step(const StepWorkspace& ws) const;

  struct Impl;

 private:
  explicit CausalLM(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  // forward_step of one token of one sequence as one persistent kernel
  // (kernels/decode_step.h); false where the model or device does not allow
  // it (an error saying why when `required`).
  bool persistent_step(StepWorkspace& ws, PagedKVCache& cache, bool ids_from_argmax, bool required) const;
  std::shared_ptr<Impl> impl_;
};

}  // namespace hipformers
