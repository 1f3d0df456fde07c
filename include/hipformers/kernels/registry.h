// Swappable kernels (Transformers' `use_kernels`): a registry of the named
// implementations hipformers has for each layer kind on each device key, the
// default per device, and a KernelConfig that overrides the defaults.
//
//   layer kinds: RMSNorm, RotaryEmbedding, SiLUAndMul, Attention
//   device keys: cpu, cuda (NVIDIA build), rocm (HIP build)
//
// Only implementations that exist in src/kernels are registered (docs/KERNELS.md
// has the table). A model resolves one KernelSelection at load time and calls
// its layers through it; the selection's function pointers check that the
// tensors live on the selection's device.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hipformers/core/json.h"
#include "hipformers/core/tensor.h"
#include "hipformers/kernels/attention.h"
#include "hipformers/kernels/rotary.h"
#include "hipformers/runtime/device.h"

namespace hipformers::kernels {

enum class LayerKind { kRMSNorm, kRotaryEmbedding, kSiLUAndMul, kAttention };
inline constexpr std::array<LayerKind, 4> kLayerKinds{LayerKind::kRMSNorm, LayerKind::kRotaryEmbedding,
                                                      LayerKind::kSiLUAndMul, LayerKind::kAttention};
inline constexpr std::array<std::string_view, 3> kDeviceKeys{"cpu", "cuda", "rocm"};

// "RMSNorm", "RotaryEmbedding", "SiLUAndMul", "Attention".
std::string_view layer_kind_name(LayerKind kind);
// Error(kInvalidInput) listing the known layer kinds for anything else.
LayerKind parse_layer_kind(std::string_view name);
// "cpu" for the CPU; for a GPU the key of this build's backend ("cuda" or
// "rocm"; "cuda" in a CPU-only build, which has no GPU to run on).
std::string_view device_key(const Device& device);
// The GPU key this build runs ("cuda", "rocm"), or "" in a CPU-only build.
std::string_view built_gpu_key();
// Error(kInvalidInput) listing cpu, cuda, rocm for anything else.
void check_device_key(std::string_view key);

// `add` non-null: residual = round(add + residual) with x the residual, as
// add_rms_norm; null: rms_norm(x).
using RmsNormFn = void (*)(const Tensor* add, Tensor& x, const Tensor& weight, double eps, DType dtype, Tensor& out,
                           Tensor* rstd);
using RopeFn = void (*)(Tensor& x, int64_t heads, std::span<const int64_t> positions, const RopeFrequencies& freqs,
                        DType dtype);
using SiluAndMulFn = void (*)(const Tensor& gate, const Tensor& up, DType dtype, Tensor& out);
// Ignores spec.eager: the kernel decides (eager kernels also fill `probs`).
using AttentionFn = void (*)(const Tensor& q, std::span<const int64_t> positions, const KVCacheView& cache,
                             const AttentionSpec& spec, Tensor& out, Tensor* probs);

struct KernelInfo {
  LayerKind layer = LayerKind::kRMSNorm;
  std::string_view device;       // "cpu", "cuda", "rocm"
  std::string_view name;         // e.g. "rms_norm_reference"
  std::string_view source;       // the file it lives in, e.g. "src/kernels/rms_norm_cpu.cc"
  std::string_view description;  // one line
  bool is_default = false;       // the device's default for this layer
  bool eager_attention = false;  // Attention only: materialises probabilities (can return weights)
  // Whether this build can run it (CPU entries always; GPU entries in a build of that vendor).
  bool available() const;
};

// Every registered kernel, grouped by device key (cpu, cuda, rocm), then layer.
std::span<const KernelInfo> registered_kernels();
// Names registered for `layer` on `device` (registration order).
std::vector<std::string> kernel_names(LayerKind layer, std::string_view device);
// The entry; Error(kInvalidInput) naming the layer and device and listing the
// registered names when `name` is not one of them.
const KernelInfo& find_kernel(LayerKind layer, std::string_view device, std::string_view name);
const KernelInfo& default_kernel(LayerKind layer, std::string_view device);

// Overrides of the defaults, per layer kind and device key:
//   {"RMSNorm": {"cuda": "rms_norm_fused_residual", "rocm": "rms_norm_fused_residual"},
//    "Attention": {"cpu": "attention_eager"}}
// Every layer, device and name is validated against the registry when parsed.
struct KernelConfig {
  std::map<LayerKind, std::map<std::string, std::string, std::less<>>> mapping;

  // Adds one override after validating it.
  KernelConfig& set(LayerKind layer, std::string_view device, std::string_view name);
  // Error(kInvalidInput) naming `where` for a non-object, an unknown layer kind,
  // device key or kernel name (each listing the known ones).
  static KernelConfig from_json(const Json& json, const std::string& where = "kernel config");
  static KernelConfig from_file(const std::filesystem::path& path);
  Json to_json() const;
};

// What a model runs for each layer kind on one device.
struct KernelSelection {
  std::string device;  // device key
  std::array<const KernelInfo*, 4> chosen{};  // indexed by LayerKind
  RmsNormFn rms_norm = nullptr;
  RopeFn rope = nullptr;
  SiluAndMulFn silu_and_mul = nullptr;
  AttentionFn attention = nullptr;

  const KernelInfo& kernel(LayerKind layer) const { return *chosen[static_cast<std::size_t>(layer)]; }
  bool eager_attention() const { return kernel(LayerKind::kAttention).eager_attention; }
  Json to_json() const;  // {"device": "cpu", "RMSNorm": "rms_norm_reference", ...}
};

// The defaults of `device`, with `attention_kernel` (the attention backend's
// kernel, see attention_backends.h) for Attention, then `overrides` for
// `device` applied on top. Error(kUnsupported) when a chosen kernel cannot
// run in this build.
KernelSelection select_kernels(std::string_view device, std::string_view attention_kernel,
                               const KernelConfig* overrides = nullptr);

// For `hipformers kernels --json`: {"cpu": {"RMSNorm": {"default": ..., "kernels": [{name, source,
// description, available}]}, ...}, "cuda": ..., "rocm": ...}.
Json registry_json();

}  // namespace hipformers::kernels
