#include <algorithm>
#include <cstring>
#include <string>

#include "hipformers/core/error.h"
#include "hipformers/hipformers.h"
#include "hipformers/tokenizer/chat_template.h"

namespace hipformers {

std::vector<int32_t> PreTrainedModel::generate(const std::vector<int32_t>& input_ids,
                                               const GenerationOptions& options) const {
  return generate(std::vector<std::vector<int32_t>>{input_ids}, options).front();
}

std::vector<std::vector<int32_t>> PreTrainedModel::generate(const std::vector<std::vector<int32_t>>& batch,
                                                            const GenerationOptions& options,
                                                            const Tokenizer* tokenizer) const {
  std::vector<std::vector<int32_t>> out;
  for (GeneratedSequence& s : hipformers::generate(model_, generation_config_, batch, options, tokenizer)) {
    std::vector<int32_t> full = std::move(s.prompt);
    full.insert(full.end(), s.generated.begin(), s.generated.end());
    out.push_back(std::move(full));
  }
  return out;
}

Tensor PreTrainedModel::logits(std::span<const int32_t> ids) const {
  const ModelConfig& c = model_.config();
  const auto T = static_cast<int64_t>(ids.size());
  if (T == 0) throw_invalid("logits: no input tokens");
  if (T > c.max_position_embeddings)
    throw_invalid("sequence of " + std::to_string(T) + " tokens is longer than max_position_embeddings (" +
                  std::to_string(c.max_position_embeddings) + ")");
  for (int64_t t = 0; t < T; ++t)
    if (ids[static_cast<std::size_t>(t)] < 0 || ids[static_cast<std::size_t>(t)] >= c.vocab_size)
      throw_invalid("token id " + std::to_string(ids[static_cast<std::size_t>(t)]) + " at position " +
                    std::to_string(t) + " is out of range for the model's vocabulary of " +
                    std::to_string(c.vocab_size));
  if (!model_.supports_batched_steps()) {
    KVCache cache = model_.new_cache(T);
    return model_.forward(ids, cache, true);
  }
  // The batched path generate() runs, in chunks whose logits fit the workspace.
  const int64_t chunk = std::min<int64_t>(T, 256);  // logits buffer: 256 x vocab
  PagedKVCache cache(model_, PagedKVCache::pages_for(T));
  const std::vector<int32_t> pages = cache.allocate(PagedKVCache::pages_for(T));
  StepWorkspace ws(model_, chunk, 1, T, /*logits_for_every_token=*/true);
  Tensor out = Tensor::empty(Shape{T, c.vocab_size}, DType::kF32);
  for (int64_t start = 0; start < T; start += chunk) {
    const int64_t n = std::min(chunk, T - start);
    const SequenceStep step{ids.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(n)), start, pages};
    model_.prepare_step(ws, cache, std::span<const SequenceStep>(&step, 1), true);
    model_.forward_step(ws, cache, false);
    const Tensor part = ws.logits_host();
    std::memcpy(out.mutable_data<float>() + start * c.vocab_size, part.data<float>(), part.nbytes());
  }
  return out;
}

PreTrainedModel AutoModelForCausalLM::from_pretrained(const std::filesystem::path& dir,
                                                      const PretrainedOptions& options) {
  ModelLoadOptions load;
  if (options.dtype != "auto") {
    auto dtype = parse_torch_dtype(options.dtype);
    if (!dtype) throw_invalid("unknown dtype '" + options.dtype + "': use auto, float32, bfloat16 or float16");
    load.dtype = dtype;
  }
  load.device = resolve_device(options.device_map);
  load.attention_backend =
      kernels::resolve_attention_backend(options.attn_implementation, kernels::device_key(load.device));
  load.use_kernels = options.use_kernels;
  load.kernel_config = options.kernel_config;
  ModelConfig config = load_model_config(dir);
  CausalLM model = CausalLM::from_checkpoint(config, Checkpoint::open(dir), load);
  kernels::log_attention_notice_once(model.attention_backend());
  return PreTrainedModel(std::move(model), load_generation_config(dir, config));
}

std::string apply_chat_template(const Tokenizer& tokenizer, const OrderedJson& messages, bool add_generation_prompt,
                                const OrderedJson& extra) {
  const TokenizerConfig& config = tokenizer.config();
  if (!config.chat_template) throw_invalid("the tokenizer has no chat_template");
  ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.extra = extra.is_object() ? extra : OrderedJson::object();
  return ChatTemplate::compile(*config.chat_template, "chat template")
      .render(messages, options, config.chat_template_special_tokens());
}

std::string TextGenerationPipeline::operator()(const std::string& text, const GenerationOptions& options) const {
  std::vector<int32_t> ids = tokenizer_.encode(text);
  auto out = model_.generate({ids}, options, &tokenizer_).front();
  std::vector<int32_t> generated(out.begin() + static_cast<std::ptrdiff_t>(ids.size()), out.end());
  return text + tokenizer_.decode(generated, true);
}

std::string TextGenerationPipeline::chat(const OrderedJson& messages, const GenerationOptions& options) const {
  // The rendered template already holds BOS etc.; do not add them again.
  std::vector<int32_t> ids = tokenizer_.encode(apply_chat_template(tokenizer_, messages), false);
  auto out = model_.generate({ids}, options, &tokenizer_).front();
  std::vector<int32_t> generated(out.begin() + static_cast<std::ptrdiff_t>(ids.size()), out.end());
  return tokenizer_.decode(generated, true);
}

TextGenerationPipeline pipeline(std::string_view task, const std::filesystem::path& model,
                                const PretrainedOptions& options) {
  if (task != "text-generation")
    throw_error(ErrorKind::kUnsupported, "pipeline task '" + std::string(task) + "' is not supported (text-generation is)");
  return TextGenerationPipeline(AutoTokenizer::from_pretrained(model), AutoModelForCausalLM::from_pretrained(model, options));
}

}  // namespace hipformers
