#include "hipformers/models/causal_lm.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <string>

#include "hipformers/core/error.h"
#include "hipformers/kernels/activation.h"
#include "hipformers/kernels/embedding.h"
#include "hipformers/kernels/linear.h"
#include "hipformers/kernels/rms_norm.h"
#include "hipformers/kernels/rotary.h"
#include "hipformers/runtime/allocator.h"
#include "causal_lm_impl.h"

namespace hipformers {

AttnImplementation parse_attn_implementation(std::string_view name) {
  if (name == "sdpa") return AttnImplementation::kSdpa;
  if (name == "eager") return AttnImplementation::kEager;
  throw_invalid("unknown attention implementation '" + std::string(name) + "': use sdpa or eager");
}

KVCache::KVCache(const ModelConfig& config, int64_t capacity, const Device& device, DType dtype)
    : capacity_(capacity) {
  if (capacity <= 0) throw_invalid("KV cache capacity must be positive, got " + std::to_string(capacity));
  layers.reserve(static_cast<std::size_t>(config.num_hidden_layers));
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    Shape shape{config.num_key_value_heads, capacity, config.head_dim};
    layers.push_back({empty_tensor(shape, dtype, device), empty_tensor(shape, dtype, device), 0});
  }
}

namespace {



// Reads weights out of a checkpoint. CPU: F32 tensors holding `dtype`'s
// values. GPU: tensors stored in `dtype` on the device, uploaded straight
// from the mapping when the checkpoint already has that dtype.
class WeightLoader {
 public:
  WeightLoader(const Checkpoint& checkpoint, DType dtype, Device device)
      : checkpoint_(std::make_shared<Checkpoint>(checkpoint)), dtype_(dtype), device_(device) {}

  Tensor load(const std::string& name, const Shape& expected) const {
    const TensorView* view = checkpoint_->find(name);
    if (!view)
      throw_error(ErrorKind::kNotFound, checkpoint_->path().string() + ": missing tensor '" + name +
                                            "' (expected shape " + expected.str() + ")");
    return convert(*view, expected);
  }

  Tensor load_optional(const std::string& name, const Shape& expected) const {
    const TensorView* view = checkpoint_->find(name);
    return view ? convert(*view, expected) : Tensor();
  }

 private:
  Tensor convert(const TensorView& view, const Shape& expected) const {
    Shape actual(std::span<const int64_t>(view.shape.data(), std::min<std::size_t>(view.shape.size(), 5)));
    if (view.shape.size() > 5 || !(actual == expected))
      throw_invalid(checkpoint_->path().string() + ": tensor '" + view.name + "' has shape " +
                    (view.shape.size() > 5 ? std::string("of rank ") + std::to_string(view.shape.size())
                                           : actual.str()) +
                    ", expected " + expected.str());
    if (view.dtype != DType::kF32 && view.dtype != DType::kBF16 && view.dtype != DType::kF16 &&
        view.dtype != DType::kF64)
      throw_error(ErrorKind::kUnsupported, checkpoint_->path().string() + ": tensor '" + view.name + "' is " +
                                               dtype_name(view.dtype) + "; only float weights are supported");
    if (device_.is_gpu()) {
      if (view.dtype == dtype_)
        return Tensor(Buffer::borrow(view.data, view.nbytes, Device::cpu(), checkpoint_), expected, dtype_)
            .to(device_);
      Tensor wide = Tensor::empty(expected, DType::kF32);
      convert_to_float(view.data, view.dtype, static_cast<std::size_t>(wide.numel()), wide.mutable_data<float>());
      return (dtype_ == DType::kF32 ? wide : wide.to(dtype_)).to(device_);
    }
    // F32 weights for an F32 model are used in place from the mapping.
    if (view.dtype == DType::kF32 && dtype_ == DType::kF32 &&
        reinterpret_cast<std::uintptr_t>(view.data) % alignof(float) == 0)
      return Tensor(Buffer::borrow(view.data, view.nbytes, Device::cpu(), checkpoint_), expected, DType::kF32);
    Tensor t = Tensor::empty(expected, DType::kF32);
    float* out = t.mutable_data<float>();
    convert_to_float(view.data, view.dtype, static_cast<std::size_t>(t.numel()), out);
    // A checkpoint in a wider dtype is cast to the model dtype first, as
    // from_pretrained(dtype=...) does.
    round_to_dtype(std::span<float>(out, static_cast<std::size_t>(t.numel())), dtype_);
    return t;
  }

  std::shared_ptr<const Checkpoint> checkpoint_;
  DType dtype_;
  Device device_;
};

// Stacks tensors of equal trailing shape along their first dimension into
// one new tensor on their device (weights fused for one GEMM).
Tensor concat_rows(std::initializer_list<Tensor> parts) {
  const Tensor& first = *parts.begin();
  Shape shape = first.shape();
  int64_t rows = 0;
  for (const Tensor& p : parts) rows += p.size(0);
  shape[0] = rows;
  Tensor out = empty_tensor(shape, first.dtype(), first.device());
  std::size_t offset = 0;
  auto* base = static_cast<char*>(out.mutable_raw_data());
  for (const Tensor& p : parts) {
    copy_bytes(base + offset, out.device(), p.raw_data(), p.device(), p.nbytes());
    offset += p.nbytes();
  }
  return out;
}

// Replaces `parts` by row views of their concatenation (the views share the
// fused tensor's memory; the separate copies are released).
Tensor fuse_rows(std::initializer_list<Tensor*> parts) {
  std::vector<Tensor> values;
  for (Tensor* p : parts) values.push_back(*p);
  Tensor fused;
  if (values.size() == 2) fused = concat_rows({values[0], values[1]});
  else fused = concat_rows({values[0], values[1], values[2]});
  int64_t row = 0;
  for (Tensor* p : parts) {
    const int64_t n = p->size(0);
    *p = fused.slice_rows(row, row + n);
    row += n;
  }
  return fused;
}

kernels::RopeSpec rope_spec(const ModelConfig& c) {
  kernels::RopeSpec s;
  const RopeScaling& r = c.rope_scaling;
  switch (r.kind) {
    case RopeScaling::kDefault: s.kind = kernels::RopeSpec::kDefault; break;
    case RopeScaling::kLinear: s.kind = kernels::RopeSpec::kLinear; break;
    case RopeScaling::kDynamic: s.kind = kernels::RopeSpec::kDynamic; break;
    case RopeScaling::kLlama3: s.kind = kernels::RopeSpec::kLlama3; break;
    case RopeScaling::kYarn: s.kind = kernels::RopeSpec::kYarn; break;
  }
  s.theta = c.rope_theta;
  s.head_dim = c.head_dim;
  s.max_position_embeddings = c.max_position_embeddings;
  s.factor = r.factor;
  s.low_freq_factor = r.low_freq_factor;
  s.high_freq_factor = r.high_freq_factor;
  s.original_max_position_embeddings = r.original_max_position_embeddings;
  s.beta_fast = r.beta_fast;
  s.beta_slow = r.beta_slow;
  s.truncate = r.truncate;
  if (r.kind == RopeScaling::kYarn) s.yarn_attention_factor = r.yarn_attention_factor();
  return s;
}

}  // namespace


CausalLM CausalLM::from_pretrained(const std::filesystem::path& dir, const ModelLoadOptions& options) {
  ModelConfig config = load_model_config(dir);
  Checkpoint checkpoint = Checkpoint::open(dir);
  return from_checkpoint(config, checkpoint, options);
}

CausalLM CausalLM::from_checkpoint(const ModelConfig& c, const Checkpoint& checkpoint,
                                   const ModelLoadOptions& options) {
  auto impl = std::make_shared<Impl>();
  impl->config = c;
  impl->dtype = options.dtype.value_or(c.dtype.value_or(DType::kF32));
  if (impl->dtype != DType::kF32 && impl->dtype != DType::kBF16 && impl->dtype != DType::kF16)
    throw_error(ErrorKind::kUnsupported, std::string("dtype ") + dtype_torch_name(impl->dtype) + " cannot run on " +
                                             options.device.str() + ": use float32, bfloat16 or float16");
  if (options.device.is_gpu() && !built_with_gpu())
    throw_error(ErrorKind::kUnsupported, "models cannot run on " + options.device.str() +
                                             ": this build has no GPU backend (use --device cpu)");
  if (c.hidden_act != "silu")
    throw_error(ErrorKind::kUnsupported, "hidden_act '" + c.hidden_act + "' is not supported (only silu)");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw_invalid("num_attention_heads (" + std::to_string(c.num_attention_heads) +
                  ") is not a multiple of num_key_value_heads (" + std::to_string(c.num_key_value_heads) + ")");
  if (c.head_dim % 2 != 0) throw_invalid("head_dim " + std::to_string(c.head_dim) + " must be even for RoPE");
  impl->device = options.device;
  const std::string key(kernels::device_key(options.device));
  if (options.attention_backend) {
    if (options.attention_backend->device != key)
      throw_invalid("attention backend '" + options.attention_backend->requested + "' was resolved for " +
                    options.attention_backend->device + ", the model runs on " + key);
    impl->attention_backend = *options.attention_backend;
  } else {
    impl->attention_backend = kernels::resolve_attention_backend(
        options.attn_implementation == AttnImplementation::kEager ? "eager" : "sdpa", key);
  }
  if (options.kernel_config && !options.use_kernels)
    throw_invalid("a kernel config was given without use_kernels (--use-kernels)");
  impl->kernels = kernels::select_kernels(key, impl->attention_backend.kernel,
                                          options.use_kernels && options.kernel_config ? &*options.kernel_config
                                                                                       : nullptr);
  impl->attn = impl->kernels.eager_attention() ? AttnImplementation::kEager : AttnImplementation::kSdpa;
  impl->rope = rope_spec(c);
  impl->rope_freqs = kernels::rope_frequencies(impl->rope, 0);
  impl->rope_cached_len = c.max_position_embeddings;

  WeightLoader w(checkpoint, impl->dtype, impl->device);
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t q_dim = c.num_attention_heads * D, kv_dim = c.num_key_value_heads * D;
  impl->embed_tokens = w.load("model.embed_tokens.weight", {c.vocab_size, H});
  impl->final_norm = w.load("model.norm.weight", {H});
  impl->lm_head = c.tie_word_embeddings ? impl->embed_tokens : w.load("lm_head.weight", {c.vocab_size, H});
  const bool qk_norm = c.architecture == Architecture::kQwen3;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    DecoderLayer L;
    L.input_norm = w.load(p + "input_layernorm.weight", {H});
    L.post_attention_norm = w.load(p + "post_attention_layernorm.weight", {H});
    L.q_proj = w.load(p + "self_attn.q_proj.weight", {q_dim, H});
    L.k_proj = w.load(p + "self_attn.k_proj.weight", {kv_dim, H});
    L.v_proj = w.load(p + "self_attn.v_proj.weight", {kv_dim, H});
    L.o_proj = w.load(p + "self_attn.o_proj.weight", {H, q_dim});
    if (c.attention_bias) {
      L.q_bias = w.load(p + "self_attn.q_proj.bias", {q_dim});
      L.k_bias = w.load(p + "self_attn.k_proj.bias", {kv_dim});
      L.v_bias = w.load(p + "self_attn.v_proj.bias", {kv_dim});
    }
    if (c.attention_output_bias) L.o_bias = w.load(p + "self_attn.o_proj.bias", {H});
    if (qk_norm) {
      L.q_norm = w.load(p + "self_attn.q_norm.weight", {D});
      L.k_norm = w.load(p + "self_attn.k_norm.weight", {D});
    }
    L.gate_proj = w.load(p + "mlp.gate_proj.weight", {I, H});
    L.up_proj = w.load(p + "mlp.up_proj.weight", {I, H});
    L.down_proj = w.load(p + "mlp.down_proj.weight", {H, I});
    if (c.mlp_bias) {
      L.gate_bias = w.load(p + "mlp.gate_proj.bias", {I});
      L.up_bias = w.load(p + "mlp.up_proj.bias", {I});
      L.down_bias = w.load(p + "mlp.down_proj.bias", {H});
    }
    L.qkv_proj = fuse_rows({&L.q_proj, &L.k_proj, &L.v_proj});
    if (c.attention_bias) L.qkv_bias = fuse_rows({&L.q_bias, &L.k_bias, &L.v_bias});
    L.gate_up_proj = fuse_rows({&L.gate_proj, &L.up_proj});
    if (c.mlp_bias) L.gate_up_bias = fuse_rows({&L.gate_bias, &L.up_bias});
    // Mistral windows every layer; Qwen2/3 (use_sliding_window) only layers
    // from max_window_layers on, as their layer_types say.
    if (c.sliding_window) {
      const bool qwen = c.architecture == Architecture::kQwen2 || c.architecture == Architecture::kQwen3;
      if (!qwen || i >= c.max_window_layers) L.sliding_window = c.sliding_window;
    }
    impl->layers.push_back(std::move(L));
  }
  return CausalLM(impl);
}

const ModelConfig& CausalLM::config() const { return impl_->config; }
DType CausalLM::dtype() const { return impl_->dtype; }
Device CausalLM::device() const { return impl_->device; }
AttnImplementation CausalLM::attn_implementation() const { return impl_->attn; }
const kernels::AttentionBackend& CausalLM::attention_backend() const { return impl_->attention_backend; }
const kernels::KernelSelection& CausalLM::kernels() const { return impl_->kernels; }

KVCache CausalLM::new_cache(int64_t capacity) const {
  if (capacity > impl_->config.max_position_embeddings)
    capacity = impl_->config.max_position_embeddings;  // no position beyond it is ever computed
  const bool gpu = impl_->device.is_gpu();
  return KVCache(impl_->config, capacity, impl_->device, gpu ? impl_->dtype : DType::kF32);
}

Tensor CausalLM::forward(std::span<const int32_t> ids, KVCache& cache, bool all_logits,
                         ForwardContext* ctx) const {
  const Impl& m = *impl_;
  const ModelConfig& c = m.config;
  const auto T = static_cast<int64_t>(ids.size());
  if (T == 0) throw_invalid("forward: no input tokens");
  if (cache.layers.size() != static_cast<std::size_t>(c.num_hidden_layers))
    throw_invalid("forward: the KV cache was made for another model");
  const int64_t start = cache.length();
  if (start + T > c.max_position_embeddings)
    throw_invalid("sequence of " + std::to_string(start + T) + " tokens is longer than max_position_embeddings (" +
                  std::to_string(c.max_position_embeddings) + ")");
  if (start + T > cache.capacity())
    throw_invalid("sequence of " + std::to_string(start + T) + " tokens does not fit the KV cache of " +
                  std::to_string(cache.capacity()));
  for (int64_t t = 0; t < T; ++t)
    if (ids[static_cast<std::size_t>(t)] < 0 || ids[static_cast<std::size_t>(t)] >= c.vocab_size)
      throw_invalid("token id " + std::to_string(ids[static_cast<std::size_t>(t)]) + " at position " +
                    std::to_string(t) + " is out of range for the model's vocabulary of " +
                    std::to_string(c.vocab_size));

  const DType dt = m.dtype;
  const kernels::KernelSelection& K = m.kernels;  // the registry's choices for this device
  const int64_t Hd = c.hidden_size, D = c.head_dim, nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  std::vector<int64_t> positions(static_cast<std::size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[static_cast<std::size_t>(t)] = start + t;
  const kernels::RopeFrequencies freqs = m.frequencies_for(start + T);

  kernels::AttentionSpec spec;
  spec.heads = nh;
  spec.kv_heads = nkv;
  spec.head_dim = D;
  spec.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  spec.dtype = dt;
  spec.eager = m.attn == AttnImplementation::kEager;

  const bool gpu = m.device.is_gpu();
  // GPU activations are stored in the model dtype; the CPU keeps F32 and emulates it.
  const DType storage = gpu ? dt : DType::kF32;
  if (gpu && cache.layers[0].k.device() != m.device)
    throw_invalid("forward: the KV cache is on " + cache.layers[0].k.device().str() + ", the model on " +
                  m.device.str());
  if (gpu && ctx && ctx->keep_activations)
    throw_error(ErrorKind::kUnsupported, "keeping activations (training) is CPU-only for now");
  const bool keep = ctx && ctx->keep_activations;
  if (ctx) {
    ctx->layers.clear();
    ctx->attentions.clear();
  }
  auto empty = [&](int64_t rows, int64_t cols) { return empty_tensor(Shape{rows, cols}, storage, m.device); };

  Tensor hidden = empty(T, Hd);  // the residual stream
  kernels::embedding(m.embed_tokens, ids, hidden);
  Tensor branch;  // the last block's output, not yet added to `hidden`
  Tensor normed = empty(T, Hd);
  for (std::size_t li = 0; li < m.layers.size(); ++li) {
    const DecoderLayer& L = m.layers[li];
    ForwardContext::Layer saved;
    Tensor rstd = keep ? Tensor::empty(Shape{T}, DType::kF32) : Tensor();
    if (keep) saved.input = branch.defined() ? Tensor() : hidden.clone();
    K.rms_norm(branch.defined() ? &branch : nullptr, hidden, L.input_norm, c.rms_norm_eps, dt, normed,
               keep ? &rstd : nullptr);
    if (keep) {
      if (!saved.input.defined()) saved.input = hidden.clone();
      saved.attn_norm_out = normed.clone();
      saved.attn_rstd = rstd;
    }

    // ---- self-attention ----
    Tensor q = empty(T, nh * D), k = empty(T, nkv * D), v = empty(T, nkv * D);
    kernels::linear(normed, L.q_proj, L.q_bias, dt, q);
    kernels::linear(normed, L.k_proj, L.k_bias, dt, k);
    kernels::linear(normed, L.v_proj, L.v_bias, dt, v);
    if (L.q_norm.defined()) {  // Qwen3: RMSNorm over each head's vector, before RoPE
      Tensor qh = q.reshape({T * nh, D}), kh = k.reshape({T * nkv, D});
      K.rms_norm(nullptr, qh, L.q_norm, c.rms_norm_eps, dt, qh, nullptr);
      K.rms_norm(nullptr, kh, L.k_norm, c.rms_norm_eps, dt, kh, nullptr);
    }
    K.rope(q, nh, positions, freqs, dt);
    K.rope(k, nkv, positions, freqs, dt);
    if (keep) {
      saved.q = q.clone();
      saved.k = k.clone();
      saved.v = v.clone();
    }
    kernels::KVCacheView& layer_cache = cache.layers[li];
    kernels::kv_cache_append(layer_cache, k, v);
    spec.sliding_window = L.sliding_window;
    Tensor attn = empty(T, nh * D);
    Tensor probs;
    const bool want_probs = ctx && ctx->output_attentions && spec.eager;
    if (want_probs) probs = empty_tensor(Shape{nh, T, layer_cache.length}, DType::kF32, m.device);
    K.attention(q, positions, layer_cache, spec, attn, want_probs ? &probs : nullptr);
    if (want_probs) ctx->attentions.push_back(gpu ? probs.to(Device::cpu()) : probs);
    if (keep) saved.attn_out = attn.clone();
    Tensor attn_proj = empty(T, Hd);
    kernels::linear(attn, L.o_proj, L.o_bias, dt, attn_proj);

    // ---- MLP ----
    if (keep) rstd = Tensor::empty(Shape{T}, DType::kF32);
    K.rms_norm(&attn_proj, hidden, L.post_attention_norm, c.rms_norm_eps, dt, normed, keep ? &rstd : nullptr);
    if (keep) {
      saved.mlp_norm_out = normed.clone();
      saved.mlp_rstd = rstd;
    }
    const int64_t I = c.intermediate_size;
    Tensor gate = empty(T, I), up = empty(T, I);
    kernels::linear(normed, L.gate_proj, L.gate_bias, dt, gate);
    kernels::linear(normed, L.up_proj, L.up_bias, dt, up);
    if (keep) {
      saved.gate = gate.clone();
      saved.up = up.clone();
    }
    K.silu_and_mul(gate, up, dt, gate);
    if (keep) saved.act = gate.clone();
    branch = empty(T, Hd);
    kernels::linear(gate, L.down_proj, L.down_bias, dt, branch);
    if (keep) ctx->layers.push_back(std::move(saved));
  }
  Tensor final_rstd = keep ? Tensor::empty(Shape{T}, DType::kF32) : Tensor();
  K.rms_norm(&branch, hidden, m.final_norm, c.rms_norm_eps, dt, normed, keep ? &final_rstd : nullptr);
  if (keep) {
    ctx->final_norm_input = hidden.clone();
    ctx->final_rstd = final_rstd;
    ctx->final_hidden = normed.clone();
  }
  Tensor rows = all_logits ? normed : normed.slice_rows(T - 1, T);
  Tensor logits = empty(rows.size(0), c.vocab_size);
  kernels::linear(rows, m.lm_head, Tensor(), dt, logits);
  if (!gpu) return logits;
  Tensor host = logits.to(Device::cpu());
  return host.dtype() == DType::kF32 ? host : host.to(DType::kF32);
}

}  // namespace hipformers
