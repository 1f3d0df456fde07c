// `hipformers make-model`: writes a random-weight Hugging Face checkpoint of a
// named real shape (config.json, generation_config.json, model.safetensors and,
// if asked, the tokenizer files), so examples, tests and benchmarks can run a
// real architecture without downloading weights. Weights are deterministic from
// --seed: norm weights 1 + N(0, std), everything else N(0, std).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "make_model.h"
#include "hipformers/core/dtype.h"
#include "hipformers/core/error.h"
#include "hipformers/core/file.h"
#include "hipformers/core/json.h"
#include "hipformers/core/tensor.h"
#include "hipformers/io/checkpoint.h"
#include "hipformers/io/safetensors.h"

namespace hipformers::cli {
namespace {

namespace fs = std::filesystem;

// A Qwen3 shape: the fields of its config.json that differ between sizes.
struct Shape {
  const char* name;
  int64_t hidden, layers, heads, kv_heads, head_dim, intermediate, vocab, max_pos;
  bool tied;
};

// qwen3-0.6b is Qwen/Qwen3-0.6B; qwen3-mini keeps its vocabulary and token ids
// (so the real Qwen3 tokenizer works) with a tiny body for fast tests.
constexpr Shape kShapes[] = {
    {"qwen3-0.6b", 1024, 28, 16, 8, 128, 3072, 151936, 40960, true},
    {"qwen3-mini", 64, 2, 4, 2, 32, 128, 151936, 40960, true},
};
constexpr int64_t kBosId = 151643;  // <|endoftext|>
constexpr int64_t kEosId = 151645;  // <|im_end|>

std::string shape_names() {
  std::string names;
  for (const Shape& s : kShapes) names += (names.empty() ? "" : ", ") + std::string(s.name);
  return names;
}

const Shape& find_shape(const std::string& name) {
  for (const Shape& s : kShapes)
    if (name == s.name) return s;
  throw_invalid("unknown --shape '" + name + "'; shapes: " + shape_names());
}

// config.json with the keys Transformers (4.51+) writes for Qwen3ForCausalLM.
OrderedJson config_json(const Shape& s, DType dtype) {
  OrderedJson c;
  c["architectures"] = {"Qwen3ForCausalLM"};
  c["attention_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["bos_token_id"] = kBosId;
  c["dtype"] = dtype_torch_name(dtype);
  c["eos_token_id"] = kEosId;
  c["head_dim"] = s.head_dim;
  c["hidden_act"] = "silu";
  c["hidden_size"] = s.hidden;
  c["initializer_range"] = 0.02;
  c["intermediate_size"] = s.intermediate;
  c["max_position_embeddings"] = s.max_pos;
  c["max_window_layers"] = s.layers;
  c["model_type"] = "qwen3";
  c["num_attention_heads"] = s.heads;
  c["num_hidden_layers"] = s.layers;
  c["num_key_value_heads"] = s.kv_heads;
  c["rms_norm_eps"] = 1e-06;
  c["rope_scaling"] = nullptr;
  c["rope_theta"] = 1000000.0;
  c["sliding_window"] = nullptr;
  c["tie_word_embeddings"] = s.tied;
  c["torch_dtype"] = dtype_torch_name(dtype);  // the key older Transformers read
  c["transformers_version"] = "4.51.0";
  c["use_cache"] = true;
  c["use_sliding_window"] = false;
  c["vocab_size"] = s.vocab;
  return c;
}

// Qwen3's token ids; greedy by default (random weights make sampling defaults moot).
OrderedJson generation_config_json() {
  OrderedJson g;
  g["bos_token_id"] = kBosId;
  g["eos_token_id"] = {kEosId, kBosId};
  g["pad_token_id"] = kBosId;
  g["transformers_version"] = "4.51.0";
  return g;
}

// Deterministic normal numbers that do not depend on the standard library
// (std::normal_distribution differs between implementations): splitmix64
// seeded from (seed, tensor name), Box-Muller.
class Normal {
 public:
  Normal(uint64_t seed, const std::string& name) : state_(seed) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a of the name
    for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
    state_ ^= h;
    next();
  }
  double operator()() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double u1 = 0;
    while (u1 <= 0) u1 = static_cast<double>(next() >> 11) * 0x1.0p-53;
    const double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
    have_spare_ = true;
    return r * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
  double spare_ = 0;
  bool have_spare_ = false;
};

struct RandomTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

RandomTensor make_tensor(const std::string& name, std::vector<int64_t> shape, bool norm, DType dtype,
                         double std_dev, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  RandomTensor t{name, std::move(shape), std::vector<unsigned char>(static_cast<std::size_t>(n) * dtype_size(dtype))};
  Normal normal(seed, name);
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>((norm ? 1.0 : 0.0) + std_dev * normal());
    unsigned char* dst = t.bytes.data() + static_cast<std::size_t>(i) * dtype_size(dtype);
    if (dtype == DType::kF32) {
      std::memcpy(dst, &v, 4);
    } else {
      const uint16_t bits = dtype == DType::kBF16 ? float_to_bf16(v) : float_to_f16(v);
      std::memcpy(dst, &bits, 2);
    }
  }
  return t;
}

// Every tensor the Qwen3 loader (src/models/causal_lm.cc) reads, in module order.
std::vector<RandomTensor> make_weights(const Shape& s, DType dtype, double std_dev, uint64_t seed) {
  std::vector<RandomTensor> w;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, bool norm = false) {
    w.push_back(make_tensor(name, std::move(shape), norm, dtype, std_dev, seed));
  };
  const int64_t H = s.hidden, q_dim = s.heads * s.head_dim, kv_dim = s.kv_heads * s.head_dim;
  add("model.embed_tokens.weight", {s.vocab, H});
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "self_attn.q_proj.weight", {q_dim, H});
    add(p + "self_attn.k_proj.weight", {kv_dim, H});
    add(p + "self_attn.v_proj.weight", {kv_dim, H});
    add(p + "self_attn.o_proj.weight", {H, q_dim});
    add(p + "self_attn.q_norm.weight", {s.head_dim}, true);
    add(p + "self_attn.k_norm.weight", {s.head_dim}, true);
    add(p + "mlp.gate_proj.weight", {s.intermediate, H});
    add(p + "mlp.up_proj.weight", {s.intermediate, H});
    add(p + "mlp.down_proj.weight", {H, s.intermediate});
    add(p + "input_layernorm.weight", {H}, true);
    add(p + "post_attention_layernorm.weight", {H}, true);
  }
  add("model.norm.weight", {H}, true);
  if (!s.tied) add("lm_head.weight", {s.vocab, H});
  return w;
}

void write_json(const fs::path& path, const OrderedJson& j) {
  const std::string text = j.dump(2) + "\n";
  write_file_atomic(path, text.data(), text.size());
}

}  // namespace

void run_make_model(const MakeModelArgs& a) {
  // Every argument is checked before anything is written.
  const Shape& shape = find_shape(a.shape);
  const std::optional<DType> dtype = parse_torch_dtype(a.dtype);
  if (!dtype || (*dtype != DType::kF32 && *dtype != DType::kBF16 && *dtype != DType::kF16))
    throw_invalid("unknown --dtype '" + a.dtype + "': use bfloat16, float32 or float16");
  if (!std::isfinite(a.std_dev) || a.std_dev < 0) throw_invalid("--std must be a finite number >= 0");
  std::vector<fs::path> tokenizer_files;
  if (!a.tokenizer_dir.empty()) {
    const fs::path dir(a.tokenizer_dir);
    if (!fs::is_directory(dir)) throw_error(ErrorKind::kNotFound, a.tokenizer_dir + ": no such directory (--tokenizer-dir)");
    if (!fs::is_regular_file(dir / "tokenizer.json"))
      throw_error(ErrorKind::kNotFound, (dir / "tokenizer.json").string() + ": no such file (--tokenizer-dir)");
    tokenizer_files.push_back(dir / "tokenizer.json");
    if (fs::is_regular_file(dir / "tokenizer_config.json")) tokenizer_files.push_back(dir / "tokenizer_config.json");
  }
  // Never write into someone's files: the output must be new or an empty directory.
  const fs::path out(a.output);
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(out, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(fs::status(out, ec)))
      throw_invalid(a.output + " exists and is not a directory; give a new or empty --output directory");
    if (!fs::is_empty(out, ec) || ec)
      throw_invalid(a.output + " is not empty; make-model never overwrites files, give a new or empty --output directory");
  }
  fs::create_directories(out, ec);
  if (ec) throw_error(ErrorKind::kRuntime, a.output + ": cannot create directory: " + ec.message());

  std::vector<RandomTensor> weights = make_weights(shape, *dtype, a.std_dev, a.seed);
  std::vector<TensorToWrite> views;
  std::size_t parameters = 0;
  for (const RandomTensor& t : weights) {
    views.push_back({t.name, *dtype, t.shape, t.bytes.data(), t.bytes.size()});
    parameters += t.bytes.size() / dtype_size(*dtype);
  }
  save_checkpoint(out, views);
  write_json(out / "config.json", config_json(shape, *dtype));
  write_json(out / "generation_config.json", generation_config_json());
  for (const fs::path& f : tokenizer_files) {
    const std::string bytes = read_file(f);
    write_file_atomic(out / f.filename(), bytes.data(), bytes.size());
  }
  std::cout << "wrote " << out.string() << ": " << shape.name << ", " << parameters << " parameters, "
            << dtype_torch_name(*dtype) << ", seed " << a.seed << (tokenizer_files.empty() ? "" : ", with tokenizer")
            << "\n";
}

void add_make_model_commands(CLI::App& app) {
  auto args = std::make_shared<MakeModelArgs>();
  CLI::App* cmd = app.add_subcommand("make-model", "Write a random-weight Hugging Face checkpoint of a named shape");
  cmd->add_option("--shape", args->shape, "Model shape: " + shape_names())->required();
  cmd->add_option("--output", args->output, "New (or empty) directory to write")->required();
  cmd->add_option("--dtype", args->dtype, "bfloat16, float32 or float16")->capture_default_str();
  cmd->add_option("--std", args->std_dev, "Standard deviation of the weights (norms: 1 + N(0, std))")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Random seed (same seed, same bytes)")->capture_default_str();
  cmd->add_option("--tokenizer-dir", args->tokenizer_dir,
                  "Copy tokenizer.json and tokenizer_config.json from this directory");
  cmd->callback([args] { run_make_model(*args); });
}

}  // namespace hipformers::cli
