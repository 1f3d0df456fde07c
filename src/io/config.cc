#include "hipformers/io/config.h"

#include <cmath>
#include <limits>

#include "hipformers/core/error.h"
#include "hipformers/core/file.h"

namespace hipformers {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSupportedArchitectures =
    "Qwen3ForCausalLM, Qwen2ForCausalLM, LlamaForCausalLM, MistralForCausalLM";

struct ArchInfo {
  Architecture arch;
  const char* model_type;
  const char* class_name;
};

constexpr ArchInfo kArchs[] = {
    {Architecture::kQwen3, "qwen3", "Qwen3ForCausalLM"},
    {Architecture::kQwen2, "qwen2", "Qwen2ForCausalLM"},
    {Architecture::kLlama, "llama", "LlamaForCausalLM"},
    {Architecture::kMistral, "mistral", "MistralForCausalLM"},
};

const ArchInfo* arch_by_model_type(const std::string& model_type) {
  for (const auto& a : kArchs)
    if (model_type == a.model_type) return &a;
  return nullptr;
}

const ArchInfo* arch_by_class(const std::string& name) {
  for (const auto& a : kArchs)
    if (name == a.class_name) return &a;
  return nullptr;
}

const ArchInfo& arch_info(Architecture arch) {
  for (const auto& a : kArchs)
    if (a.arch == arch) return a;
  return kArchs[0];
}

std::string json_type(const Json& v) {
  if (v.is_number_integer()) return "integer " + v.dump();
  if (v.is_number_float()) return "number " + v.dump();
  if (v.is_string()) return "string " + v.dump();
  if (v.is_boolean()) return "boolean " + v.dump();
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

// Typed access to an object's keys; absent or null keys are "not set".
class Reader {
 public:
  Reader(const Json& obj, std::string where) : obj_(obj), where_(std::move(where)) {}

  const Json* get(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const char* key) const { return get(key) != nullptr; }

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw_invalid(where_ + ": '" + key + "' " + what);
  }
  [[noreturn]] void wrong_type(const char* key, const char* expected, const Json& got) const {
    fail(key, std::string("must be ") + expected + ", got " + json_type(got));
  }

  std::optional<int64_t> opt_int(const char* key) const {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    return as_int(key, *v);
  }
  int64_t int_or(const char* key, int64_t fallback) const { return opt_int(key).value_or(fallback); }

  std::optional<double> opt_number(const char* key) const {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) wrong_type(key, "a number", *v);
    double d = v->get<double>();
    if (!std::isfinite(d)) fail(key, "must be finite");
    return d;
  }
  double number_or(const char* key, double fallback) const { return opt_number(key).value_or(fallback); }

  std::optional<bool> opt_bool(const char* key) const {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) wrong_type(key, "true or false", *v);
    return v->get<bool>();
  }
  bool bool_or(const char* key, bool fallback) const { return opt_bool(key).value_or(fallback); }

  std::optional<std::string> opt_string(const char* key) const {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(key, "a string", *v);
    return v->get<std::string>();
  }

  // An int, a list of ints, or null.
  std::vector<int64_t> int_list(const char* key) const {
    const Json* v = get(key);
    std::vector<int64_t> out;
    if (!v) return out;
    if (v->is_array()) {
      for (const Json& e : *v) {
        if (!e.is_number_integer()) wrong_type(key, "an integer or a list of integers", *v);
        out.push_back(as_int(key, e));
      }
      return out;
    }
    if (!v->is_number_integer()) wrong_type(key, "an integer or a list of integers", *v);
    out.push_back(as_int(key, *v));
    return out;
  }

  const std::string& where() const { return where_; }

 private:
  int64_t as_int(const char* key, const Json& v) const {
    if (v.is_number_unsigned()) {
      auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<int64_t>::max())) fail(key, "is too large");
      return static_cast<int64_t>(u);
    }
    if (!v.is_number_integer()) wrong_type(key, "an integer", v);
    return v.get<int64_t>();
  }

  const Json& obj_;
  std::string where_;
};

// ---- RoPE ----------------------------------------------------------------------

struct RopeKindInfo {
  RopeScaling::Kind kind;
  const char* name;
};
constexpr RopeKindInfo kRopeKinds[] = {
    {RopeScaling::kDefault, "default"}, {RopeScaling::kLinear, "linear"}, {RopeScaling::kDynamic, "dynamic"},
    {RopeScaling::kLlama3, "llama3"},   {RopeScaling::kYarn, "yarn"},
};

RopeScaling parse_rope(const Json& params, const std::string& where, const char* key,
                       int64_t max_position_embeddings) {
  if (!params.is_object())
    throw_invalid(where + ": '" + key + "' must be an object, got " + json_type(params));
  const std::string rope_where = where + ": " + key;
  Reader r(params, rope_where);
  RopeScaling rope;

  std::optional<std::string> type = r.opt_string("rope_type");
  if (!type) type = r.opt_string("type");
  // No type means plain RoPE, in both spellings (Transformers 5 does the same,
  // ignoring any other keys with a warning).
  if (!type) type = "default";
  bool known = false;
  for (const auto& k : kRopeKinds)
    if (*type == k.name) {
      rope.kind = k.kind;
      known = true;
    }
  if (!known)
    throw_error(ErrorKind::kUnsupported, rope_where + ": rope type '" + *type +
                                             "' is not supported; known: default, linear, dynamic, llama3, yarn");

  if (auto prf = r.opt_number("partial_rotary_factor"); prf && *prf != 1.0)
    throw_error(ErrorKind::kUnsupported, rope_where + ": partial_rotary_factor " + std::to_string(*prf) +
                                             " is not supported");

  auto require = [&](const char* name) -> double {
    auto v = r.opt_number(name);
    if (!v) throw_invalid(rope_where + ": rope type '" + *type + "' needs '" + name + "'");
    return *v;
  };
  auto require_positive_factor = [&]() {
    rope.factor = require("factor");
    if (!(rope.factor > 0)) r.fail("factor", "must be positive");
  };

  switch (rope.kind) {
    case RopeScaling::kDefault:
      break;
    case RopeScaling::kLinear:
    case RopeScaling::kDynamic:
      require_positive_factor();
      break;
    case RopeScaling::kLlama3: {
      require_positive_factor();
      rope.low_freq_factor = require("low_freq_factor");
      rope.high_freq_factor = require("high_freq_factor");
      if (!r.has("original_max_position_embeddings"))
        throw_invalid(rope_where + ": rope type 'llama3' needs 'original_max_position_embeddings'");
      rope.original_max_position_embeddings = *r.opt_int("original_max_position_embeddings");
      if (rope.original_max_position_embeddings <= 0)
        r.fail("original_max_position_embeddings", "must be positive");
      if (!(rope.low_freq_factor > 0)) r.fail("low_freq_factor", "must be positive");
      if (!(rope.high_freq_factor > rope.low_freq_factor))
        r.fail("high_freq_factor", "must be greater than low_freq_factor");
      break;
    }
    case RopeScaling::kYarn: {
      require_positive_factor();
      rope.original_max_position_embeddings =
          r.int_or("original_max_position_embeddings", max_position_embeddings);
      if (rope.original_max_position_embeddings <= 0)
        r.fail("original_max_position_embeddings", "must be positive");
      rope.beta_fast = r.number_or("beta_fast", 32.0);
      rope.beta_slow = r.number_or("beta_slow", 1.0);
      rope.attention_factor = r.opt_number("attention_factor");
      rope.mscale = r.opt_number("mscale");
      rope.mscale_all_dim = r.opt_number("mscale_all_dim");
      rope.truncate = r.bool_or("truncate", true);
      if (rope.attention_factor && !(*rope.attention_factor > 0)) r.fail("attention_factor", "must be positive");
      break;
    }
  }
  return rope;
}

std::optional<DType> parse_config_dtype(const Reader& r) {
  const char* key = r.has("dtype") ? "dtype" : "torch_dtype";
  auto name = r.opt_string(key);
  if (!name || *name == "auto") return std::nullopt;
  auto d = parse_torch_dtype(*name);
  if (!d) r.fail(key, "names an unknown dtype '" + *name + "'");
  return d;
}

}  // namespace

const char* architecture_name(Architecture arch) { return arch_info(arch).class_name; }

const char* rope_kind_name(RopeScaling::Kind kind) {
  for (const auto& k : kRopeKinds)
    if (k.kind == kind) return k.name;
  return "default";
}

double RopeScaling::yarn_attention_factor() const {
  if (attention_factor) return *attention_factor;
  auto get_mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
  if (mscale && mscale_all_dim) return get_mscale(factor, *mscale) / get_mscale(factor, *mscale_all_dim);
  return get_mscale(factor, 1.0);
}

ModelConfig parse_model_config(const Json& json, const std::string& source) {
  if (!json.is_object()) throw_invalid(source + ": not a JSON object");
  Reader r(json, source);
  ModelConfig c;
  c.raw = json;

  // ---- Architecture --------------------------------------------------------------
  std::optional<std::string> model_type = r.opt_string("model_type");
  std::vector<std::string> classes;
  if (const Json* a = r.get("architectures")) {
    if (!a->is_array()) r.wrong_type("architectures", "a list of class names", *a);
    for (const Json& e : *a) {
      if (!e.is_string()) r.wrong_type("architectures", "a list of class names", *a);
      classes.push_back(e.get<std::string>());
    }
  }
  const ArchInfo* info = model_type ? arch_by_model_type(*model_type) : nullptr;
  if (!model_type && !classes.empty()) info = arch_by_class(classes[0]);
  bool classes_ok = true;
  for (const std::string& cls : classes)
    if (!info || cls != info->class_name) classes_ok = false;
  if (!info || !classes_ok) {
    std::string first_class = classes.empty() ? std::string("?") : classes[0];
    for (const std::string& cls : classes)
      if (!info || cls != info->class_name) {
        first_class = cls;
        break;
      }
    if (info && arch_by_class(first_class))
      throw_invalid(source + ": architectures lists '" + first_class + "' but model_type is '" + *model_type +
                    "' (expected " + info->class_name + ")");
    if (!model_type && classes.empty())
      throw_invalid(source + ": missing 'model_type' and 'architectures'; supported: " +
                    kSupportedArchitectures);
    throw_error(ErrorKind::kUnsupported, source + ": architecture '" + first_class + "' (model_type '" +
                                             model_type.value_or("?") + "') is not supported; supported: " +
                                             kSupportedArchitectures);
  }
  c.architecture = info->arch;
  c.model_type = info->model_type;

  // ---- Sizes, with each Transformers config class's defaults ------------------------
  struct Defaults {
    int64_t vocab, hidden, intermediate, layers, heads, max_pos;
    std::optional<int64_t> kv_heads, head_dim, bos, eos;
  };
  Defaults d{};
  switch (c.architecture) {
    case Architecture::kQwen3:
      d = {151936, 4096, 22016, 32, 32, 32768, 32, 128, std::nullopt, std::nullopt};
      break;
    case Architecture::kQwen2:
      d = {151936, 4096, 22016, 32, 32, 32768, 32, std::nullopt, std::nullopt, std::nullopt};
      break;
    case Architecture::kLlama:
      d = {32000, 4096, 11008, 32, 32, 2048, std::nullopt, std::nullopt, 1, 2};
      break;
    case Architecture::kMistral:
      d = {32000, 4096, 14336, 32, 32, 4096 * 32, 8, std::nullopt, 1, 2};
      break;
  }
  c.vocab_size = r.int_or("vocab_size", d.vocab);
  c.hidden_size = r.int_or("hidden_size", d.hidden);
  c.intermediate_size = r.int_or("intermediate_size", d.intermediate);
  c.num_hidden_layers = r.int_or("num_hidden_layers", d.layers);
  c.num_attention_heads = r.int_or("num_attention_heads", d.heads);
  c.max_position_embeddings = r.int_or("max_position_embeddings", d.max_pos);
  // An explicit null means "same as num_attention_heads" in every class.
  if (r.has("num_key_value_heads")) c.num_key_value_heads = *r.opt_int("num_key_value_heads");
  else if (json.contains("num_key_value_heads")) c.num_key_value_heads = c.num_attention_heads;
  else c.num_key_value_heads = d.kv_heads.value_or(c.num_attention_heads);

  auto positive = [&](const char* key, int64_t v) {
    if (v <= 0) r.fail(key, "must be positive, got " + std::to_string(v));
  };
  positive("vocab_size", c.vocab_size);
  positive("hidden_size", c.hidden_size);
  positive("intermediate_size", c.intermediate_size);
  positive("num_hidden_layers", c.num_hidden_layers);
  positive("num_attention_heads", c.num_attention_heads);
  positive("num_key_value_heads", c.num_key_value_heads);
  positive("max_position_embeddings", c.max_position_embeddings);

  if (r.has("head_dim")) {
    c.head_dim = *r.opt_int("head_dim");
  } else if (d.head_dim && !json.contains("head_dim")) {
    c.head_dim = *d.head_dim;
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      throw_invalid(source + ": 'hidden_size' " + std::to_string(c.hidden_size) +
                    " is not a multiple of 'num_attention_heads' " + std::to_string(c.num_attention_heads) +
                    " (and 'head_dim' is not given)");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  positive("head_dim", c.head_dim);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw_invalid(source + ": 'num_attention_heads' " + std::to_string(c.num_attention_heads) +
                  " is not a multiple of 'num_key_value_heads' " + std::to_string(c.num_key_value_heads));

  c.rms_norm_eps = r.number_or("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0)) r.fail("rms_norm_eps", "must be positive");
  c.tie_word_embeddings = r.bool_or("tie_word_embeddings", false);

  c.hidden_act = r.opt_string("hidden_act").value_or("silu");
  if (c.hidden_act != "silu" && c.hidden_act != "swish")
    throw_error(ErrorKind::kUnsupported,
                source + ": 'hidden_act' '" + c.hidden_act + "' is not supported; supported: silu");

  // ---- Biases ------------------------------------------------------------------------
  switch (c.architecture) {
    case Architecture::kQwen2:  // q/k/v always have a bias, o_proj never
      c.attention_bias = true;
      c.attention_output_bias = false;
      break;
    case Architecture::kQwen3:
    case Architecture::kLlama:
      c.attention_bias = c.attention_output_bias = r.bool_or("attention_bias", false);
      break;
    case Architecture::kMistral:
      c.attention_bias = c.attention_output_bias = false;
      break;
  }
  c.mlp_bias = c.architecture == Architecture::kLlama ? r.bool_or("mlp_bias", false) : false;

  // ---- Sliding window ----------------------------------------------------------------
  std::optional<int64_t> window = json.contains("sliding_window") ? r.opt_int("sliding_window") : 4096;
  switch (c.architecture) {
    case Architecture::kQwen3:
    case Architecture::kQwen2:
      c.use_sliding_window = r.bool_or("use_sliding_window", false);
      c.max_window_layers = r.int_or("max_window_layers", 28);
      c.sliding_window = c.use_sliding_window ? window : std::nullopt;
      break;
    case Architecture::kMistral:
      c.sliding_window = window;
      c.use_sliding_window = window.has_value();
      break;
    case Architecture::kLlama:
      break;
  }
  if (c.sliding_window && *c.sliding_window <= 0) r.fail("sliding_window", "must be positive or null");

  // ---- RoPE: Transformers 5 rope_parameters, or rope_theta + rope_scaling ----------------
  if (auto prf = r.opt_number("partial_rotary_factor"); prf && *prf != 1.0)
    throw_error(ErrorKind::kUnsupported, source + ": 'partial_rotary_factor' " + std::to_string(*prf) +
                                             " is not supported");
  c.rope_theta = r.number_or("rope_theta", 10000.0);
  if (const Json* p = r.get("rope_parameters")) {
    c.rope_scaling = parse_rope(*p, source, "rope_parameters", c.max_position_embeddings);
    if (p->contains("rope_theta") && !(*p)["rope_theta"].is_null())
      c.rope_theta = Reader(*p, source + ": rope_parameters").number_or("rope_theta", c.rope_theta);
  } else if (const Json* s = r.get("rope_scaling")) {
    c.rope_scaling = parse_rope(*s, source, "rope_scaling", c.max_position_embeddings);
  }
  if (!(c.rope_theta > 0)) r.fail("rope_theta", "must be positive");

  // ---- dtype and special tokens ----------------------------------------------------------
  c.dtype = parse_config_dtype(r);
  c.bos_token_id = json.contains("bos_token_id") ? r.opt_int("bos_token_id") : d.bos;
  c.pad_token_id = r.opt_int("pad_token_id");
  if (json.contains("eos_token_id")) c.eos_token_ids = r.int_list("eos_token_id");
  else if (d.eos) c.eos_token_ids = {*d.eos};
  return c;
}

ModelConfig load_model_config(const fs::path& dir_or_file) {
  std::error_code ec;
  fs::path file = fs::is_directory(dir_or_file, ec) ? dir_or_file / "config.json" : dir_or_file;
  return parse_model_config(read_json_file(file), file.string());
}

// ---- generation_config.json ----------------------------------------------------------------

GenerationConfig generation_config_from_model(const ModelConfig& model) {
  GenerationConfig g;
  g.bos_token_id = model.bos_token_id;
  g.pad_token_id = model.pad_token_id;
  g.eos_token_ids = model.eos_token_ids;
  return g;
}

GenerationConfig parse_generation_config(const Json& json, const std::string& source) {
  if (!json.is_object()) throw_invalid(source + ": not a JSON object");
  Reader r(json, source);
  GenerationConfig g;
  g.raw = json;
  g.bos_token_id = r.opt_int("bos_token_id");
  g.pad_token_id = r.opt_int("pad_token_id");
  g.eos_token_ids = r.int_list("eos_token_id");
  g.do_sample = r.bool_or("do_sample", false);
  g.temperature = r.number_or("temperature", 1.0);
  g.top_p = r.number_or("top_p", 1.0);
  g.min_p = r.number_or("min_p", 0.0);
  g.repetition_penalty = r.number_or("repetition_penalty", 1.0);
  // An explicit null top_k disables top-k, as in Transformers.
  g.top_k = json.contains("top_k") ? r.opt_int("top_k").value_or(0) : 50;
  g.max_new_tokens = r.opt_int("max_new_tokens");
  g.max_length = r.opt_int("max_length");

  if (g.temperature < 0) r.fail("temperature", "must not be negative");
  if (!(g.top_p > 0 && g.top_p <= 1)) r.fail("top_p", "must be in (0, 1]");
  if (!(g.min_p >= 0 && g.min_p <= 1)) r.fail("min_p", "must be in [0, 1]");
  if (!(g.repetition_penalty > 0)) r.fail("repetition_penalty", "must be positive");
  if (g.top_k < 0) r.fail("top_k", "must not be negative");
  if (g.max_new_tokens && *g.max_new_tokens < 0) r.fail("max_new_tokens", "must not be negative");
  if (g.max_length && *g.max_length < 0) r.fail("max_length", "must not be negative");
  return g;
}

namespace {

std::optional<GenerationConfig> read_generation_config(const fs::path& dir_or_file, fs::path* file_out) {
  std::error_code ec;
  fs::path file = fs::is_directory(dir_or_file, ec) ? dir_or_file / "generation_config.json" : dir_or_file;
  *file_out = file;
  if (!fs::exists(file, ec)) return std::nullopt;
  return parse_generation_config(read_json_file(file), file.string());
}

}  // namespace

GenerationConfig load_generation_config(const fs::path& dir_or_file) {
  fs::path file;
  return read_generation_config(dir_or_file, &file).value_or(GenerationConfig{});
}

GenerationConfig load_generation_config(const fs::path& dir_or_file, const ModelConfig& model) {
  fs::path file;
  auto g = read_generation_config(dir_or_file, &file);
  if (!g) return generation_config_from_model(model);
  if (!g->raw.contains("bos_token_id")) g->bos_token_id = model.bos_token_id;
  if (!g->raw.contains("pad_token_id")) g->pad_token_id = model.pad_token_id;
  if (!g->raw.contains("eos_token_id")) g->eos_token_ids = model.eos_token_ids;
  return *g;
}

}  // namespace hipformers
