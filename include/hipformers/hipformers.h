// The user-facing API, shaped like the Transformers guide's Python:
//
//   auto tokenizer = hipformers::AutoTokenizer::from_pretrained(dir);
//   auto model = hipformers::AutoModelForCausalLM::from_pretrained(dir, {.dtype = "bfloat16", .device_map = "auto"});
//   auto ids = tokenizer.encode("The French Bread Law states");
//   auto out = model.generate(ids, {.max_new_tokens = 50, .do_sample = false});
//   std::cout << tokenizer.decode(out);
//
//   auto generator = hipformers::pipeline("text-generation", dir);
//   std::cout << generator("Once upon a time", {.max_new_tokens = 20});
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hipformers/core/json.h"
#include "hipformers/generation/generate.h"
#include "hipformers/models/causal_lm.h"
#include "hipformers/tokenizer/tokenizer.h"

namespace hipformers {

struct AutoTokenizer {
  static Tokenizer from_pretrained(const std::filesystem::path& dir) { return Tokenizer::from_pretrained(dir); }
};

struct PretrainedOptions {
  std::string dtype = "auto";              // "auto" (config.json's), "float32", "bfloat16", "float16"
  std::string device_map = "auto";         // "auto", "cpu", "cuda", "cuda:N"
  // "sdpa" (default), "eager", "flash_attention_2", "flash_attention_3" or a
  // kernel repository ("kernels-community/flash-attn"), resolved for the device
  // by kernels::resolve_attention_backend; Error listing what the device has.
  std::string attn_implementation = "sdpa";
  // Swappable kernels: with use_kernels, kernel_config overrides the
  // registry's per-device defaults (kernels/registry.h, docs/KERNELS.md).
  bool use_kernels = false;
  std::optional<kernels::KernelConfig> kernel_config;
};

class PreTrainedModel {
 public:
  PreTrainedModel(CausalLM model, GenerationConfig generation_config)
      : model_(std::move(model)), generation_config_(std::move(generation_config)) {}

  // Like model.generate(input_ids): the prompt followed by the continuation.
  std::vector<int32_t> generate(const std::vector<int32_t>& input_ids, const GenerationOptions& options = {}) const;
  std::vector<std::vector<int32_t>> generate(const std::vector<std::vector<int32_t>>& batch,
                                             const GenerationOptions& options = {},
                                             const Tokenizer* tokenizer = nullptr) const;
  // F32 logits [ids.size(), vocab] of every position (a fresh cache).
  Tensor logits(std::span<const int32_t> ids) const;

  const CausalLM& model() const { return model_; }
  const ModelConfig& config() const { return model_.config(); }
  const GenerationConfig& generation_config() const { return generation_config_; }
  Device device() const { return model_.device(); }
  // The attention backend that runs ("sdpa", "eager", "flash_attention_2", ...)
  // after resolution for the device, and every layer's kernel.
  const std::string& attn_implementation() const { return model_.attention_backend().name; }
  const kernels::AttentionBackend& attention_backend() const { return model_.attention_backend(); }
  const kernels::KernelSelection& kernels() const { return model_.kernels(); }

 private:
  CausalLM model_;
  GenerationConfig generation_config_;
};

struct AutoModelForCausalLM {
  // Errors: unknown dtype / attention implementation, a device this build cannot
  // run (resolve_device's message), anything config/checkpoint loading reports.
  static PreTrainedModel from_pretrained(const std::filesystem::path& dir, const PretrainedOptions& options = {});
};

// Renders `messages` (a JSON list of {role, content}) with the tokenizer's chat
// template, with the generation prompt appended, as apply_chat_template does.
std::string apply_chat_template(const Tokenizer& tokenizer, const OrderedJson& messages,
                                bool add_generation_prompt = true, const OrderedJson& extra = OrderedJson::object());

class TextGenerationPipeline {
 public:
  TextGenerationPipeline(Tokenizer tokenizer, PreTrainedModel model)
      : tokenizer_(std::move(tokenizer)), model_(std::move(model)) {}
  // The prompt followed by the generated text (return_full_text=True).
  std::string operator()(const std::string& text, const GenerationOptions& options = {}) const;
  // Chat: the assistant's reply to `messages`.
  std::string chat(const OrderedJson& messages, const GenerationOptions& options = {}) const;
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const PreTrainedModel& model() const { return model_; }

 private:
  Tokenizer tokenizer_;
  PreTrainedModel model_;
};

// Only "text-generation" exists; anything else is Error(kUnsupported).
TextGenerationPipeline pipeline(std::string_view task, const std::filesystem::path& model,
                                const PretrainedOptions& options = {});

}  // namespace hipformers
