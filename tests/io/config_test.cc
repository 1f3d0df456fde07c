#include "hipformers/io/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "hipformers/core/error.h"
#include "hipformers/core/file.h"
#include "test_paths.h"
#include "test_util.h"

namespace hipformers {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

fs::path config_dir(const std::string& name) { return testing::test_data("io/configs/" + name); }


ModelConfig parse(const std::string& text) { return parse_model_config(Json::parse(text), "config.json"); }

std::pair<ErrorKind, std::string> parse_error(const std::string& text) {
  return error_of([&] { parse(text); });
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

// ---- Real configs ------------------------------------------------------------------

TEST(ModelConfig, Qwen3_0_6B) {
  ModelConfig c = load_model_config(config_dir("qwen3-0.6b"));
  EXPECT_EQ(c.architecture, Architecture::kQwen3);
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::kDefault);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.attention_output_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_FALSE(c.use_sliding_window);
  EXPECT_EQ(c.max_window_layers, 28);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645}));
  EXPECT_EQ(c.raw["transformers_version"], "4.51.0");
  // The file path works as well as the directory.
  EXPECT_EQ(load_model_config(config_dir("qwen3-0.6b") / "config.json").hidden_size, 1024);
}

TEST(ModelConfig, Qwen2_5_0_5B) {
  ModelConfig c = load_model_config(config_dir("qwen2.5-0.5b"));
  EXPECT_EQ(c.architecture, Architecture::kQwen2);
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_attention_heads, 14);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 64);  // hidden / heads
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.attention_bias);          // q/k/v bias is implicit in Qwen2
  EXPECT_FALSE(c.attention_output_bias);  // o_proj has none
  // sliding_window 32768 is ignored because use_sliding_window is false.
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_EQ(c.max_window_layers, 24);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151643}));
}

TEST(ModelConfig, Llama3_2_1B) {
  ModelConfig c = load_model_config(config_dir("llama-3.2-1b-instruct"));
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_hidden_layers, 16);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_STREQ(architecture_name(c.architecture), "LlamaForCausalLM");
  EXPECT_STREQ(rope_kind_name(c.rope_scaling.kind), "llama3");
}

TEST(ModelConfig, Mistral7B) {
  ModelConfig c = load_model_config(config_dir("mistral-7b-v0.1"));
  EXPECT_EQ(c.architecture, Architecture::kMistral);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_TRUE(c.use_sliding_window);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2}));

  ModelConfig v2 = load_model_config(config_dir("mistral-7b-instruct-v0.2"));
  EXPECT_FALSE(v2.sliding_window.has_value());
  EXPECT_FALSE(v2.use_sliding_window);
  EXPECT_DOUBLE_EQ(v2.rope_theta, 1e6);
}

TEST(ModelConfig, Transformers5Spelling) {
  ModelConfig c = load_model_config(config_dir("qwen3-0.6b-transformers5"));
  EXPECT_EQ(c.architecture, Architecture::kQwen3);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::kDefault);
  EXPECT_EQ(c.dtype, DType::kBF16);  // "dtype" instead of "torch_dtype"
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_EQ(c.head_dim, 128);

  ModelConfig l = parse(R"({"model_type":"llama","architectures":["LlamaForCausalLM"],
    "hidden_size":2048,"num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":16,
    "rope_parameters":{"rope_type":"llama3","rope_theta":500000.0,"factor":32.0,"low_freq_factor":1.0,
                       "high_freq_factor":4.0,"original_max_position_embeddings":8192}})");
  EXPECT_DOUBLE_EQ(l.rope_theta, 500000.0);
  EXPECT_EQ(l.rope_scaling.kind, RopeScaling::kLlama3);
  EXPECT_DOUBLE_EQ(l.rope_scaling.factor, 32.0);
  EXPECT_EQ(l.rope_scaling.original_max_position_embeddings, 8192);
}

// ---- Defaults of each Transformers config class -------------------------------------------

TEST(ModelConfig, DefaultsPerArchitecture) {
  ModelConfig q3 = parse(R"({"model_type":"qwen3"})");
  EXPECT_EQ(q3.vocab_size, 151936);
  EXPECT_EQ(q3.hidden_size, 4096);
  EXPECT_EQ(q3.intermediate_size, 22016);
  EXPECT_EQ(q3.num_key_value_heads, 32);
  EXPECT_EQ(q3.head_dim, 128);
  EXPECT_EQ(q3.max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(q3.rope_theta, 10000.0);
  EXPECT_FALSE(q3.tie_word_embeddings);
  EXPECT_FALSE(q3.bos_token_id.has_value());
  EXPECT_TRUE(q3.eos_token_ids.empty());
  EXPECT_FALSE(q3.dtype.has_value());

  ModelConfig q2 = parse(R"({"model_type":"qwen2","hidden_size":896,"num_attention_heads":32})");
  EXPECT_EQ(q2.num_key_value_heads, 32);  // Qwen2Config's default, not num_attention_heads
  EXPECT_EQ(q2.head_dim, 28);             // hidden / heads (no head_dim default)
  EXPECT_EQ(q2.vocab_size, 151936);

  ModelConfig ll = parse(R"({"model_type":"llama"})");
  EXPECT_EQ(ll.vocab_size, 32000);
  EXPECT_EQ(ll.intermediate_size, 11008);
  EXPECT_EQ(ll.num_key_value_heads, 32);  // = num_attention_heads
  EXPECT_EQ(ll.head_dim, 128);
  EXPECT_EQ(ll.max_position_embeddings, 2048);
  EXPECT_EQ(ll.bos_token_id, 1);
  EXPECT_EQ(ll.eos_token_ids, (std::vector<int64_t>{2}));

  ModelConfig mi = parse(R"({"model_type":"mistral"})");
  EXPECT_EQ(mi.intermediate_size, 14336);
  EXPECT_EQ(mi.num_key_value_heads, 8);
  EXPECT_EQ(mi.max_position_embeddings, 131072);
  EXPECT_EQ(mi.sliding_window, 4096);

  // architectures alone is enough.
  EXPECT_EQ(parse(R"({"architectures":["MistralForCausalLM"]})").architecture, Architecture::kMistral);
  // null num_key_value_heads / head_dim mean "derive".
  ModelConfig n = parse(R"({"model_type":"qwen3","hidden_size":1024,"num_attention_heads":16,
                            "num_key_value_heads":null,"head_dim":null})");
  EXPECT_EQ(n.num_key_value_heads, 16);
  EXPECT_EQ(n.head_dim, 64);
}

TEST(ModelConfig, Qwen2DefaultKvHeadsMustDivide) {
  // Qwen2Config's num_key_value_heads default is 32, not num_attention_heads.
  auto [kind, msg] = parse_error(R"({"model_type":"qwen2","hidden_size":896,"num_attention_heads":14})");
  EXPECT_HAS(msg, "'num_attention_heads' 14 is not a multiple of 'num_key_value_heads' 32");
}

TEST(ModelConfig, Biases) {
  ModelConfig l = parse(R"({"model_type":"llama","attention_bias":true,"mlp_bias":true})");
  EXPECT_TRUE(l.attention_bias);
  EXPECT_TRUE(l.attention_output_bias);
  EXPECT_TRUE(l.mlp_bias);
  ModelConfig q3 = parse(R"({"model_type":"qwen3","attention_bias":true})");
  EXPECT_TRUE(q3.attention_bias);
  EXPECT_TRUE(q3.attention_output_bias);
  EXPECT_FALSE(q3.mlp_bias);
  ModelConfig q2 = parse(R"({"model_type":"qwen2","num_key_value_heads":8})");
  EXPECT_TRUE(q2.attention_bias);
  EXPECT_FALSE(q2.attention_output_bias);
}

TEST(ModelConfig, QwenSlidingWindowOnlyWhenEnabled) {
  ModelConfig q = parse(R"({"model_type":"qwen2","num_key_value_heads":8,"use_sliding_window":true,
                            "sliding_window":32768,"max_window_layers":21})");
  EXPECT_EQ(q.sliding_window, 32768);
  EXPECT_TRUE(q.use_sliding_window);
  EXPECT_EQ(q.max_window_layers, 21);
}

TEST(ModelConfig, RopeScalingVariants) {
  ModelConfig lin = parse(R"({"model_type":"llama","rope_scaling":{"type":"linear","factor":2.0}})");
  EXPECT_EQ(lin.rope_scaling.kind, RopeScaling::kLinear);
  EXPECT_DOUBLE_EQ(lin.rope_scaling.factor, 2.0);
  ModelConfig dyn = parse(R"({"model_type":"llama","rope_scaling":{"rope_type":"dynamic","factor":4}})");
  EXPECT_EQ(dyn.rope_scaling.kind, RopeScaling::kDynamic);
  ModelConfig yarn = parse(R"({"model_type":"qwen3","max_position_embeddings":40960,
      "rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}})");
  EXPECT_EQ(yarn.rope_scaling.kind, RopeScaling::kYarn);
  EXPECT_EQ(yarn.rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(yarn.rope_scaling.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(yarn.rope_scaling.beta_slow, 1.0);
  EXPECT_FALSE(yarn.rope_scaling.attention_factor.has_value());
  EXPECT_NEAR(yarn.rope_scaling.yarn_attention_factor(), 0.1 * std::log(4.0) + 1.0, 1e-12);
  ModelConfig yarn2 = parse(R"({"model_type":"qwen3","max_position_embeddings":1000,
      "rope_parameters":{"rope_type":"yarn","factor":2.0,"attention_factor":1.5,"beta_fast":16}})");
  EXPECT_EQ(yarn2.rope_scaling.original_max_position_embeddings, 1000);
  EXPECT_DOUBLE_EQ(yarn2.rope_scaling.yarn_attention_factor(), 1.5);
  EXPECT_DOUBLE_EQ(yarn2.rope_scaling.beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(yarn2.rope_theta, 10000.0);
}

// ---- Errors ---------------------------------------------------------------------------------

TEST(ModelConfigErrors, UnsupportedArchitecture) {
  auto [kind, msg] = error_of([] { load_model_config(config_dir("gpt-neox")); });
  EXPECT_EQ(kind, ErrorKind::kUnsupported);
  EXPECT_HAS(msg,
             "config.json: architecture 'GPTNeoXForCausalLM' (model_type 'gpt_neox') is not supported; supported: "
             "Qwen3ForCausalLM, Qwen2ForCausalLM, LlamaForCausalLM, MistralForCausalLM");
  std::tie(kind, msg) = parse_error(R"({"model_type":"llama","architectures":["LlamaForSequenceClassification"]})");
  EXPECT_EQ(kind, ErrorKind::kUnsupported);
  EXPECT_HAS(msg, "architecture 'LlamaForSequenceClassification' (model_type 'llama') is not supported");
  std::tie(kind, msg) = parse_error(R"({"model_type":"qwen2","architectures":["Qwen3ForCausalLM"]})");
  EXPECT_HAS(msg, "architectures lists 'Qwen3ForCausalLM' but model_type is 'qwen2'");
  std::tie(kind, msg) = parse_error(R"({"hidden_size":8})");
  EXPECT_HAS(msg, "missing 'model_type' and 'architectures'");
}

TEST(ModelConfigErrors, WrongTypesNameTheKey) {
  auto [kind, msg] = error_of([] { load_model_config(config_dir("malformed")); });
  EXPECT_EQ(kind, ErrorKind::kInvalidInput);
  EXPECT_HAS(msg, "config.json: 'hidden_size' must be an integer, got string \"2048\"");
  EXPECT_HAS(parse_error(R"({"model_type":"llama","tie_word_embeddings":1})").second,
             "'tie_word_embeddings' must be true or false");
  EXPECT_HAS(parse_error(R"({"model_type":"llama","rms_norm_eps":"1e-5"})").second, "'rms_norm_eps' must be a number");
  EXPECT_HAS(parse_error(R"({"model_type":"llama","vocab_size":32000.5})").second, "'vocab_size' must be an integer");
  EXPECT_HAS(parse_error(R"({"model_type":"llama","eos_token_id":[1,"2"]})").second,
             "'eos_token_id' must be an integer or a list of integers");
  EXPECT_HAS(parse_error(R"({"model_type":"llama","torch_dtype":"float12"})").second,
             "'torch_dtype' names an unknown dtype 'float12'");
  EXPECT_HAS(parse_error(R"({"model_type":"llama","rope_scaling":"linear"})").second,
             "'rope_scaling' must be an object");
  EXPECT_HAS(parse_error(R"({"model_type":3})").second, "'model_type' must be a string");
  EXPECT_HAS(parse_error(R"([1])").second, "config.json: not a JSON object");
}

TEST(ModelConfigErrors, SizesAndHeads) {
  EXPECT_HAS(parse_error(R"({"model_type":"llama","hidden_size":0})").second, "'hidden_size' must be positive, got 0");
  EXPECT_HAS(parse_error(R"({"model_type":"llama","num_hidden_layers":-2})").second,
             "'num_hidden_layers' must be positive");
  EXPECT_HAS(parse_error(R"({"model_type":"llama","num_attention_heads":32,"num_key_value_heads":6})").second,
             "'num_attention_heads' 32 is not a multiple of 'num_key_value_heads' 6");
  EXPECT_HAS(parse_error(R"({"model_type":"llama","hidden_size":100,"num_attention_heads":32})").second,
             "'hidden_size' 100 is not a multiple of 'num_attention_heads' 32");
  EXPECT_HAS(parse_error(R"({"model_type":"qwen3","head_dim":0})").second, "'head_dim' must be positive");
}

TEST(ModelConfigErrors, ActivationAndRope) {
  auto [kind, msg] = parse_error(R"({"model_type":"llama","hidden_act":"gelu"})");
  EXPECT_EQ(kind, ErrorKind::kUnsupported);
  EXPECT_HAS(msg, "'hidden_act' 'gelu' is not supported");
  std::tie(kind, msg) = parse_error(R"({"model_type":"llama","rope_scaling":{"rope_type":"longrope","factor":2}})");
  EXPECT_EQ(kind, ErrorKind::kUnsupported);
  EXPECT_HAS(msg, "config.json: rope_scaling: rope type 'longrope' is not supported; known: default, linear, "
                  "dynamic, llama3, yarn");
  std::tie(kind, msg) = parse_error(
      R"({"model_type":"llama","rope_scaling":{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4}})");
  EXPECT_HAS(msg, "rope type 'llama3' needs 'original_max_position_embeddings'");
  std::tie(kind, msg) = parse_error(
      R"({"model_type":"llama","rope_scaling":{"rope_type":"llama3","factor":8,"high_freq_factor":4,"original_max_position_embeddings":8192}})");
  EXPECT_HAS(msg, "needs 'low_freq_factor'");
  std::tie(kind, msg) = parse_error(R"({"model_type":"llama","rope_scaling":{"rope_type":"linear"}})");
  EXPECT_HAS(msg, "rope type 'linear' needs 'factor'");
  // No type: plain RoPE, as Transformers 5 reads it.
  EXPECT_EQ(parse(R"({"model_type":"llama","rope_scaling":{"factor":2}})").rope_scaling.kind, RopeScaling::kDefault);
  std::tie(kind, msg) = parse_error(R"({"model_type":"llama","rope_theta":-1})");
  EXPECT_HAS(msg, "'rope_theta' must be positive");
}

TEST(ModelConfigErrors, MissingFile) {
  auto [kind, msg] = error_of([] { load_model_config(config_dir("does-not-exist")); });
  EXPECT_EQ(kind, ErrorKind::kNotFound);
  EXPECT_HAS(msg, "does-not-exist");
}

// ---- generation_config.json -------------------------------------------------------------------

TEST(GenerationConfig, Qwen3File) {
  ModelConfig m = load_model_config(config_dir("qwen3-0.6b"));
  GenerationConfig g = load_generation_config(config_dir("qwen3-0.6b"), m);
  EXPECT_TRUE(g.do_sample);
  EXPECT_DOUBLE_EQ(g.temperature, 0.6);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_DOUBLE_EQ(g.top_p, 0.95);
  EXPECT_DOUBLE_EQ(g.min_p, 0.0);
  EXPECT_DOUBLE_EQ(g.repetition_penalty, 1.0);
  EXPECT_EQ(g.bos_token_id, 151643);
  EXPECT_EQ(g.pad_token_id, 151643);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_FALSE(g.max_new_tokens.has_value());
  EXPECT_FALSE(g.max_length.has_value());
}

TEST(GenerationConfig, MissingFileFallsBackToModelIds) {
  ModelConfig m = load_model_config(config_dir("llama-3.2-1b-instruct"));
  GenerationConfig g = load_generation_config(config_dir("llama-3.2-1b-instruct"), m);
  EXPECT_EQ(g.bos_token_id, 128000);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_FALSE(g.do_sample);
  EXPECT_DOUBLE_EQ(g.temperature, 1.0);
  EXPECT_EQ(g.top_k, 50);
  EXPECT_DOUBLE_EQ(g.top_p, 1.0);
  GenerationConfig plain = load_generation_config(config_dir("llama-3.2-1b-instruct"));
  EXPECT_TRUE(plain.eos_token_ids.empty());
  EXPECT_EQ(generation_config_from_model(m).eos_token_ids, g.eos_token_ids);
}

TEST(GenerationConfig, ParseAndValidate) {
  GenerationConfig g = parse_generation_config(
      Json::parse(R"({"eos_token_id":7,"top_k":null,"temperature":null,"min_p":0.05,"max_new_tokens":128,
                      "max_length":4096,"repetition_penalty":1.1})"),
      "generation_config.json");
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{7}));
  EXPECT_EQ(g.top_k, 0);  // null disables top-k
  EXPECT_DOUBLE_EQ(g.temperature, 1.0);
  EXPECT_DOUBLE_EQ(g.min_p, 0.05);
  EXPECT_EQ(g.max_new_tokens, 128);
  EXPECT_EQ(g.max_length, 4096);
  EXPECT_DOUBLE_EQ(g.repetition_penalty, 1.1);

  auto err = [](const std::string& text) {
    return error_of([&] { parse_generation_config(Json::parse(text), "generation_config.json"); }).second;
  };
  EXPECT_HAS(err(R"({"do_sample":"yes"})"), "generation_config.json: 'do_sample' must be true or false");
  EXPECT_HAS(err(R"({"top_p":1.5})"), "'top_p' must be in (0, 1]");
  EXPECT_HAS(err(R"({"top_k":-1})"), "'top_k' must not be negative");
  EXPECT_HAS(err(R"({"temperature":-0.5})"), "'temperature' must not be negative");
  EXPECT_HAS(err(R"({"eos_token_id":"</s>"})"), "'eos_token_id' must be an integer or a list of integers");
  EXPECT_HAS(err(R"({"max_new_tokens":1.5})"), "'max_new_tokens' must be an integer");
}

}  // namespace
}  // namespace hipformers
