// The kernel registry: one entry per implementation that exists in
// src/kernels, with a function that checks the tensors are on the entry's
// device and then runs that implementation through the validated ops.
#include "hipformers/kernels/registry.h"

#include <stdexcept>
#include <string>

#include "hipformers/core/error.h"
#include "hipformers/kernels/activation.h"
#include "hipformers/kernels/rms_norm.h"

namespace hipformers::kernels {
namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void on(bool gpu, const Tensor& t, const char* kernel) {
  if (t.device().is_gpu() != gpu)
    throw_invalid(std::string("kernel ") + kernel + " runs on " + (gpu ? "a GPU" : "the CPU") +
                  ", but its tensors are on " + t.device().str());
}

template <bool Gpu>
void rms_norm_impl(const Tensor* add, Tensor& x, const Tensor& weight, double eps, DType dtype, Tensor& out,
                   Tensor* rstd) {
  on(Gpu, x, Gpu ? "rms_norm_fused_residual" : "rms_norm_reference");
  if (add) add_rms_norm(*add, x, weight, eps, dtype, out, rstd);
  else rms_norm(x, weight, eps, dtype, out, rstd);
}

template <bool Gpu>
void rope_impl(Tensor& x, int64_t heads, std::span<const int64_t> positions, const RopeFrequencies& freqs,
               DType dtype) {
  on(Gpu, x, Gpu ? "rotary_gpu" : "rotary_reference");
  apply_rope(x, heads, positions, freqs, dtype);
}

template <bool Gpu>
void silu_impl(const Tensor& gate, const Tensor& up, DType dtype, Tensor& out) {
  on(Gpu, gate, Gpu ? "silu_and_mul_gpu" : "silu_and_mul_reference");
  silu_and_mul(gate, up, dtype, out);
}

template <bool Gpu, bool Eager>
void attention_impl(const Tensor& q, std::span<const int64_t> positions, const KVCacheView& cache,
                    const AttentionSpec& spec, Tensor& out, Tensor* probs) {
  on(Gpu, q, Eager ? "attention_eager" : (Gpu ? "attention_fused" : "attention_sdpa"));
  AttentionSpec s = spec;
  s.eager = Eager;
  attention(q, positions, cache, s, out, Eager ? probs : nullptr);
}

struct Entry {
  KernelInfo info;
  RmsNormFn rms_norm = nullptr;
  RopeFn rope = nullptr;
  SiluAndMulFn silu = nullptr;
  AttentionFn attention = nullptr;
};

constexpr auto kNorm = LayerKind::kRMSNorm;
constexpr auto kRope = LayerKind::kRotaryEmbedding;
constexpr auto kSilu = LayerKind::kSiLUAndMul;
constexpr auto kAttn = LayerKind::kAttention;

// The GPU kernels are the same .cu files for CUDA and ROCm (HIP); the two keys
// list them separately so a KernelConfig can pick per vendor.
std::vector<Entry> make_entries() {
  std::vector<Entry> e;
  e.push_back({{kNorm, "cpu", "rms_norm_reference", "src/kernels/rms_norm_cpu.cc",
                "fp32 reference (OpenMP rows), residual add fused, torch's bf16/f16 rounding points", true},
               rms_norm_impl<false>});
  e.push_back({{kRope, "cpu", "rotary_reference", "src/kernels/rotary_cpu.cc",
                "rotate_half RoPE in place, fp32 with dtype rounding emulation", true},
               nullptr, rope_impl<false>});
  e.push_back({{kSilu, "cpu", "silu_and_mul_reference", "src/kernels/activation_cpu.cc",
                "silu(gate) * up, fp32 with dtype rounding emulation", true},
               nullptr, nullptr, silu_impl<false>});
  // The batched path's folded variants: the op runs inside the neighbouring
  // projection (fused_linear, linear.h) for steps of up to 8 tokens; the
  // reference path and larger steps run the plain op. (On the CPU they only
  // serve to test the folded path against the reference.)
  e.push_back({{kNorm, "cpu", "rms_norm_in_projection", "src/kernels/linear_cpu.cc",
                "batched decode: RMSNorm folded into the next projection, residual add into the previous one", false},
               rms_norm_impl<false>});
  e.push_back({{kSilu, "cpu", "silu_and_mul_in_projection", "src/kernels/linear_cpu.cc",
                "batched decode: silu(gate) * up in the gate|up projection's epilogue", false},
               nullptr, nullptr, silu_impl<false>});
  e.push_back({{kAttn, "cpu", "attention_sdpa", "src/kernels/attention_cpu.cc",
                "one pass per query row, online softmax, no stored probabilities", true},
               nullptr, nullptr, nullptr, attention_impl<false, false>});
  e.push_back({{kAttn, "cpu", "attention_eager", "src/kernels/attention_cpu.cc",
                "materialised probabilities (output_attentions), torch eager rounding", false, true},
               nullptr, nullptr, nullptr, attention_impl<false, true>});
  for (std::string_view gpu : {std::string_view("cuda"), std::string_view("rocm")}) {
    // The defaults on GPUs are the separate kernels: folding RMSNorm and
    // SwiGLU into the decode GEMVs measured 3% slower on the H200
    // (docs/PERFORMANCE.md), so the folded variants are selectable only.
    e.push_back({{kNorm, gpu, "rms_norm_fused_residual", "src/kernels/rms_norm_gpu.cu",
                  "one block per row, residual add fused, fp32 accumulation", true},
                 rms_norm_impl<true>});
    e.push_back({{kNorm, gpu, "rms_norm_in_projection", "src/kernels/linear_gpu.cu",
                  "batched decode (<= 8 tokens): RMSNorm computed by every block of the next GEMV, residual add "
                  "in the previous GEMV's epilogue; rms_norm_fused_residual elsewhere",
                  false},
                 rms_norm_impl<true>});
    e.push_back({{kRope, gpu, "rotary_gpu", "src/kernels/rotary_gpu.cu",
                  "one thread per rotated pair, positions uploaded per call; batched path: q/k norm + RoPE + K/V "
                  "write in one kernel, inside the decode attention kernel for decode steps of <= 8 sequences "
                  "(16-bit, head_dim 64/128)",
                  true},
                 nullptr, rope_impl<true>});
    e.push_back({{kRope, gpu, "rotary_qkv_write", "src/kernels/qkv_rope_gpu.cu",
                  "batched path: q/k norm + RoPE + K/V write always in their own kernel before attention; "
                  "rotary_gpu elsewhere",
                  false},
                 nullptr, rope_impl<true>});
    e.push_back({{kSilu, gpu, "silu_and_mul_gpu", "src/kernels/activation_gpu.cu", "elementwise, fp32 math", true},
                 nullptr, nullptr, silu_impl<true>});
    e.push_back({{kSilu, gpu, "silu_and_mul_in_projection", "src/kernels/linear_gpu.cu",
                  "batched decode (<= 8 tokens): silu(gate) * up in the gate|up GEMV's epilogue; silu_and_mul_gpu "
                  "elsewhere",
                  false},
                 nullptr, nullptr, silu_impl<true>});
    e.push_back({{kAttn, gpu, "attention_fused", "src/kernels/attention_gpu.cu",
                  "fused causal GQA attention, online softmax, head_dim <= 256; batched path: paged kernels (decode: "
                  "the wide kernel for <= 8 sequences where it applies, else split-K)",
                  true},
                 nullptr, nullptr, nullptr, attention_impl<true, false>});
    e.push_back({{kAttn, gpu, "attention_paged_split", "src/kernels/paged_decode_gpu.cu",
                  "batched path: the split-K paged decode kernel for every batch (page-by-page online softmax, "
                  "splits merged by the last block); attention_fused elsewhere",
                  false},
                 nullptr, nullptr, nullptr, attention_impl<true, false>});
    e.push_back({{kAttn, gpu, "attention_eager", "src/kernels/attention_gpu.cu",
                  "two passes with torch eager rounding, can store probabilities", false, true},
                 nullptr, nullptr, nullptr, attention_impl<true, true>});
  }
  return e;
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = make_entries();
  return e;
}

const std::vector<KernelInfo>& infos() {
  static const std::vector<KernelInfo> i = [] {
    std::vector<KernelInfo> out;
    for (const Entry& e : entries()) out.push_back(e.info);
    return out;
  }();
  return i;
}

const Entry& entry_of(const KernelInfo& info) {
  return entries()[static_cast<std::size_t>(&info - infos().data())];
}

}  // namespace

std::string_view layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::kRMSNorm: return "RMSNorm";
    case LayerKind::kRotaryEmbedding: return "RotaryEmbedding";
    case LayerKind::kSiLUAndMul: return "SiLUAndMul";
    case LayerKind::kAttention: return "Attention";
  }
  return "?";
}

LayerKind parse_layer_kind(std::string_view name) {
  for (LayerKind k : kLayerKinds)
    if (layer_kind_name(k) == name) return k;
  throw_invalid("unknown layer kind '" + std::string(name) +
                "'; known layer kinds: RMSNorm, RotaryEmbedding, SiLUAndMul, Attention");
}

std::string_view built_gpu_key() {
#if defined(HIPFORMERS_WITH_HIP)
  return "rocm";
#elif defined(HIPFORMERS_WITH_CUDA)
  return "cuda";
#else
  return "";
#endif
}

std::string_view device_key(const Device& device) {
  if (device.is_cpu()) return "cpu";
  return built_gpu_key().empty() ? std::string_view("cuda") : built_gpu_key();
}

void check_device_key(std::string_view key) {
  for (std::string_view k : kDeviceKeys)
    if (k == key) return;
  throw_invalid("unknown device '" + std::string(key) + "' in a kernel mapping; known devices: cpu, cuda, rocm");
}

bool KernelInfo::available() const { return device == "cpu" || device == built_gpu_key(); }

std::span<const KernelInfo> registered_kernels() { return infos(); }

std::vector<std::string> kernel_names(LayerKind layer, std::string_view device) {
  std::vector<std::string> out;
  for (const KernelInfo& k : infos())
    if (k.layer == layer && k.device == device) out.emplace_back(k.name);
  return out;
}

const KernelInfo& find_kernel(LayerKind layer, std::string_view device, std::string_view name) {
  check_device_key(device);
  for (const KernelInfo& k : infos())
    if (k.layer == layer && k.device == device && k.name == name) return k;
  throw_invalid("no " + std::string(layer_kind_name(layer)) + " kernel '" + std::string(name) + "' for " +
                std::string(device) + "; registered: " + join(kernel_names(layer, device)));
}

const KernelInfo& default_kernel(LayerKind layer, std::string_view device) {
  check_device_key(device);
  for (const KernelInfo& k : infos())
    if (k.layer == layer && k.device == device && k.is_default) return k;
  throw std::logic_error("no default " + std::string(layer_kind_name(layer)) + " kernel for " +
                         std::string(device));
}

KernelConfig& KernelConfig::set(LayerKind layer, std::string_view device, std::string_view name) {
  find_kernel(layer, device, name);
  mapping[layer][std::string(device)] = std::string(name);
  return *this;
}

KernelConfig KernelConfig::from_json(const Json& json, const std::string& where) {
  if (!json.is_object())
    throw_invalid(where + ": expected an object {\"<layer>\": {\"<device>\": \"<kernel>\"}}");
  KernelConfig config;
  for (const auto& [layer_name, devices] : json.items()) {
    LayerKind layer;
    try {
      layer = parse_layer_kind(layer_name);
    } catch (const Error& e) {
      throw_invalid(where + ": " + e.what());
    }
    if (!devices.is_object())
      throw_invalid(where + ": \"" + layer_name + "\" must map devices (cpu, cuda, rocm) to kernel names");
    for (const auto& [device, name] : devices.items()) {
      if (!name.is_string())
        throw_invalid(where + ": \"" + layer_name + "\".\"" + device + "\" must be a kernel name (a string)");
      try {
        config.set(layer, device, name.get<std::string>());
      } catch (const Error& e) {
        throw_invalid(where + ": " + e.what());
      }
    }
  }
  return config;
}

KernelConfig KernelConfig::from_file(const std::filesystem::path& path) {
  return from_json(read_json_file(path), path.string());
}

Json KernelConfig::to_json() const {
  Json out = Json::object();
  for (const auto& [layer, devices] : mapping)
    for (const auto& [device, name] : devices) out[std::string(layer_kind_name(layer))][device] = name;
  return out;
}

Json KernelSelection::to_json() const {
  Json out{{"device", device}};
  for (LayerKind k : kLayerKinds) out[std::string(layer_kind_name(k))] = std::string(kernel(k).name);
  return out;
}

KernelSelection select_kernels(std::string_view device, std::string_view attention_kernel,
                               const KernelConfig* overrides) {
  check_device_key(device);
  KernelSelection s;
  s.device = std::string(device);
  for (LayerKind k : kLayerKinds) {
    const KernelInfo* chosen = &default_kernel(k, device);
    if (k == LayerKind::kAttention && !attention_kernel.empty())
      chosen = &find_kernel(k, device, attention_kernel);
    if (overrides) {
      auto layer = overrides->mapping.find(k);
      if (layer != overrides->mapping.end()) {
        auto it = layer->second.find(device);
        if (it != layer->second.end()) chosen = &find_kernel(k, device, it->second);
      }
    }
    if (!chosen->available())
      throw_error(ErrorKind::kUnsupported, std::string(layer_kind_name(k)) + " kernel '" +
                                               std::string(chosen->name) + "' for " + std::string(device) +
                                               " is not built into this binary (backend: " +
                                               (built_gpu_key().empty() ? "cpu" : std::string(built_gpu_key())) +
                                               ")");
    s.chosen[static_cast<std::size_t>(k)] = chosen;
    const Entry& e = entry_of(*chosen);
    switch (k) {
      case LayerKind::kRMSNorm: s.rms_norm = e.rms_norm; break;
      case LayerKind::kRotaryEmbedding: s.rope = e.rope; break;
      case LayerKind::kSiLUAndMul: s.silu_and_mul = e.silu; break;
      case LayerKind::kAttention: s.attention = e.attention; break;
    }
  }
  return s;
}

Json registry_json() {
  Json out = Json::object();
  for (std::string_view device : kDeviceKeys) {
    Json dev = Json::object();
    for (LayerKind k : kLayerKinds) {
      Json layer{{"default", std::string(default_kernel(k, device).name)}, {"kernels", Json::array()}};
      for (const KernelInfo& info : infos()) {
        if (info.layer != k || info.device != device) continue;
        layer["kernels"].push_back({{"name", std::string(info.name)},
                                    {"source", std::string(info.source)},
                                    {"description", std::string(info.description)},
                                    {"available", info.available()}});
      }
      dev[std::string(layer_kind_name(k))] = std::move(layer);
    }
    out[std::string(device)] = std::move(dev);
  }
  return out;
}

}  // namespace hipformers::kernels
