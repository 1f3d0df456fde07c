// Typed config.json / generation_config.json for the supported architectures,
// with the defaults of the Transformers config classes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hipformers/core/dtype.h"
#include "hipformers/core/json.h"

namespace hipformers {

enum class Architecture { kQwen3, kQwen2, kLlama, kMistral };

// "Qwen3ForCausalLM", ...
const char* architecture_name(Architecture arch);

struct RopeScaling {
  enum Kind { kDefault, kLinear, kDynamic, kLlama3, kYarn };
  Kind kind = kDefault;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // llama3 (required) and yarn (defaults to max_position_embeddings); 0 otherwise
  int64_t original_max_position_embeddings = 0;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> attention_factor;  // as given; see yarn_attention_factor()
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  bool truncate = true;

  // Yarn's cos/sin scale as Transformers computes it: attention_factor if given,
  // else get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) when both
  // are given, else 0.1 * ln(factor) + 1 (1 when factor <= 1).
  double yarn_attention_factor() const;
};

// "default", "linear", "dynamic", "llama3", "yarn"
const char* rope_kind_name(RopeScaling::Kind kind);

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string model_type;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;         // q_proj, k_proj, v_proj have a bias
  bool attention_output_bias = false;  // o_proj has a bias
  bool mlp_bias = false;               // gate/up/down_proj have a bias (Llama mlp_bias)
  std::string hidden_act = "silu";
  // Effective sliding window: Mistral's sliding_window (null = none); Qwen2/Qwen3's
  // only when use_sliding_window is true (Transformers drops it otherwise). Qwen
  // applies it to layers >= max_window_layers.
  std::optional<int64_t> sliding_window;
  bool use_sliding_window = false;
  int64_t max_window_layers = 0;
  std::optional<DType> dtype;  // "dtype" or legacy "torch_dtype"
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  std::vector<int64_t> eos_token_ids;
  Json raw;  // the whole document
};

// Reads `<dir>/config.json` (or the file itself) and parses it.
ModelConfig load_model_config(const std::filesystem::path& dir_or_file);
// `source` names the document in error messages ("config.json" or a path).
ModelConfig parse_model_config(const Json& json, const std::string& source);

struct GenerationConfig {
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  std::vector<int64_t> eos_token_ids;
  bool do_sample = false;
  double temperature = 1.0;
  double top_p = 1.0;
  double min_p = 0.0;  // 0 = off (Transformers: None)
  double repetition_penalty = 1.0;
  int64_t top_k = 50;
  std::optional<int64_t> max_new_tokens;
  // Transformers falls back to max_length 20 when neither is set; we leave that
  // policy to the caller and report only what the file says.
  std::optional<int64_t> max_length;
  Json raw;  // the whole document (null when derived from the model config)
};

// Token ids from the model config, everything else default (what Transformers'
// GenerationConfig.from_model_config does when a model has no generation_config.json).
GenerationConfig generation_config_from_model(const ModelConfig& model);

// Parses a generation_config.json document.
GenerationConfig parse_generation_config(const Json& json, const std::string& source);

// Reads `<dir>/generation_config.json` (or the file itself). A missing file gives
// the defaults. The second form fills it from `model` instead when missing, and
// fills bos/pad/eos ids the file does not set from `model`.
GenerationConfig load_generation_config(const std::filesystem::path& dir_or_file);
GenerationConfig load_generation_config(const std::filesystem::path& dir_or_file, const ModelConfig& model);

}  // namespace hipformers
