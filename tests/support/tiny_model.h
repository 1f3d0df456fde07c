// Tiny random checkpoints written by the tests themselves (config.json +
// model.safetensors through the io layer's writer).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "hipformers/core/file.h"
#include "hipformers/core/json.h"
#include "hipformers/io/checkpoint.h"

namespace hipformers::testing {

struct TinySpec {
  std::string model_type = "qwen3";
  int64_t vocab = 64, hidden = 32, intermediate = 48, layers = 2, heads = 4, kv_heads = 2, head_dim = 16;
  bool tied = true;
  bool bias = false;  // qwen2-style q/k/v bias
  Json rope_scaling = nullptr;
  Json sliding_window = nullptr;
  int64_t max_positions = 128;
};

inline Json tiny_config(const TinySpec& s) {
  Json c = {{"model_type", s.model_type},
            {"vocab_size", s.vocab},
            {"hidden_size", s.hidden},
            {"intermediate_size", s.intermediate},
            {"num_hidden_layers", s.layers},
            {"num_attention_heads", s.heads},
            {"num_key_value_heads", s.kv_heads},
            {"head_dim", s.head_dim},
            {"max_position_embeddings", s.max_positions},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", 10000.0},
            {"tie_word_embeddings", s.tied},
            {"hidden_act", "silu"},
            {"torch_dtype", "float32"}};
  if (s.model_type == "qwen3" || s.model_type == "llama") c["attention_bias"] = s.bias;
  if (!s.rope_scaling.is_null()) c["rope_scaling"] = s.rope_scaling;
  c["sliding_window"] = s.sliding_window;
  if (s.model_type == "qwen2" || s.model_type == "qwen3") {
    c["use_sliding_window"] = !s.sliding_window.is_null();
    c["max_window_layers"] = 0;
  }
  return c;
}

// name -> (shape, values)
using TinyWeights = std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>;

inline TinyWeights tiny_weights(const TinySpec& s, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  TinyWeights w;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, bool norm = false) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = norm ? 1.0f + 0.2f * normal(rng) : normal(rng);
    w[name] = {shape, v};
  };
  const int64_t H = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  add("model.embed_tokens.weight", {s.vocab, H});
  add("model.norm.weight", {H}, true);
  if (!s.tied) add("lm_head.weight", {s.vocab, H});
  for (int64_t i = 0; i < s.layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {H}, true);
    add(p + "post_attention_layernorm.weight", {H}, true);
    add(p + "self_attn.q_proj.weight", {q, H});
    add(p + "self_attn.k_proj.weight", {kv, H});
    add(p + "self_attn.v_proj.weight", {kv, H});
    add(p + "self_attn.o_proj.weight", {H, q});
    if (s.bias) {
      add(p + "self_attn.q_proj.bias", {q});
      add(p + "self_attn.k_proj.bias", {kv});
      add(p + "self_attn.v_proj.bias", {kv});
    }
    if (s.model_type == "qwen3") {
      add(p + "self_attn.q_norm.weight", {s.head_dim}, true);
      add(p + "self_attn.k_norm.weight", {s.head_dim}, true);
    }
    add(p + "mlp.gate_proj.weight", {s.intermediate, H});
    add(p + "mlp.up_proj.weight", {s.intermediate, H});
    add(p + "mlp.down_proj.weight", {H, s.intermediate});
  }
  return w;
}

// Writes config.json + model.safetensors into a fresh directory; `edit` may
// change the weights before they are written.
inline std::filesystem::path write_tiny_model(const std::string& name, const TinySpec& s, const TinyWeights& w) {
  auto dir = std::filesystem::temp_directory_path() / ("hipformers_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string config = tiny_config(s).dump(2);
  write_file_atomic(dir / "config.json", config.data(), config.size());
  std::vector<TensorToWrite> tensors;
  for (const auto& [n, sv] : w)
    tensors.push_back({n, DType::kF32, sv.first, sv.second.data(), sv.second.size() * sizeof(float)});
  save_checkpoint(dir, tensors);
  return dir;
}

}  // namespace hipformers::testing
