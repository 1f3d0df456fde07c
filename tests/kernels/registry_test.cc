// The kernel registry: what is registered per layer kind and device, the
// defaults, KernelConfig parsing and validation, and that a selection runs
// the kernel it names.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/core/json.h"
#include "hipformers/kernels/registry.h"
#include "test_random.h"

namespace hipformers::kernels {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

TEST(KernelRegistry, EveryLayerHasOneDefaultPerDevice) {
  for (std::string_view device : kDeviceKeys)
    for (LayerKind layer : kLayerKinds) {
      int defaults = 0;
      for (const KernelInfo& k : registered_kernels())
        if (k.layer == layer && k.device == device) defaults += k.is_default;
      EXPECT_EQ(defaults, 1) << layer_kind_name(layer) << " on " << device;
    }
  EXPECT_EQ(default_kernel(LayerKind::kRMSNorm, "cpu").name, "rms_norm_reference");
  EXPECT_EQ(default_kernel(LayerKind::kRMSNorm, "cuda").name, "rms_norm_fused_residual");
  EXPECT_EQ(default_kernel(LayerKind::kRMSNorm, "rocm").name, "rms_norm_fused_residual");
  EXPECT_EQ(default_kernel(LayerKind::kAttention, "cpu").name, "attention_sdpa");
  EXPECT_EQ(default_kernel(LayerKind::kAttention, "rocm").name, "attention_fused");
  EXPECT_EQ(kernel_names(LayerKind::kAttention, "cpu"),
            (std::vector<std::string>{"attention_sdpa", "attention_eager"}));
}

TEST(KernelRegistry, NamesAreUniquePerLayerAndDevice) {
  std::set<std::string> seen;
  for (const KernelInfo& k : registered_kernels()) {
    std::string key = std::string(k.device) + "/" + std::string(layer_kind_name(k.layer)) + "/" + std::string(k.name);
    EXPECT_TRUE(seen.insert(key).second) << key;
    EXPECT_FALSE(k.source.empty());
  }
}

TEST(KernelRegistry, CpuKernelsAreAvailableInEveryBuild) {
  for (const KernelInfo& k : registered_kernels()) {
    if (k.device == "cpu") {
      EXPECT_TRUE(k.available()) << k.name;
    }
  }
  EXPECT_EQ(device_key(Device::cpu()), "cpu");
  if (built_gpu_key().empty()) {
    for (const KernelInfo& k : registered_kernels()) {
      if (k.device != "cpu") {
        EXPECT_FALSE(k.available()) << k.name;
      }
    }
  }
}

TEST(KernelRegistry, LayerKindsAndDevicesAreValidated) {
  EXPECT_EQ(parse_layer_kind("SiLUAndMul"), LayerKind::kSiLUAndMul);
  std::string m = message_of([] { parse_layer_kind("LayerNorm"); });
  EXPECT_NE(m.find("unknown layer kind 'LayerNorm'; known layer kinds: RMSNorm, RotaryEmbedding, SiLUAndMul, "
                   "Attention"),
            std::string::npos)
      << m;
  m = message_of([] { find_kernel(LayerKind::kRMSNorm, "xpu", "rms_norm_reference"); });
  EXPECT_NE(m.find("known devices: cpu, cuda, rocm"), std::string::npos) << m;
  m = message_of([] { find_kernel(LayerKind::kRMSNorm, "cuda", "rms_norm_reference"); });
  EXPECT_NE(m.find("no RMSNorm kernel 'rms_norm_reference' for cuda; registered: rms_norm_fused_residual"),
            std::string::npos)
      << m;
}

TEST(KernelConfig, ParsesJson) {
  KernelConfig c = KernelConfig::from_json(parse_json(
      R"({"RMSNorm": {"cuda": "rms_norm_fused_residual", "rocm": "rms_norm_fused_residual"},
          "Attention": {"cpu": "attention_eager"}})",
      "test"));
  EXPECT_EQ(c.mapping.at(LayerKind::kRMSNorm).at("rocm"), "rms_norm_fused_residual");
  EXPECT_EQ(c.mapping.at(LayerKind::kAttention).at("cpu"), "attention_eager");
  EXPECT_EQ(c.to_json()["Attention"]["cpu"], "attention_eager");
  EXPECT_EQ(KernelConfig::from_json(c.to_json()).to_json(), c.to_json());
}

TEST(KernelConfig, ErrorsNameTheProblemAndTheKnownNames) {
  auto parse = [](const char* text) { KernelConfig::from_json(parse_json(text, "t"), "cfg.json"); };
  std::string m = message_of([&] { parse(R"([1, 2])"); });
  EXPECT_NE(m.find("cfg.json: expected an object"), std::string::npos) << m;
  m = message_of([&] { parse(R"({"LayerNorm": {"cpu": "x"}})"); });
  EXPECT_NE(m.find("cfg.json: unknown layer kind 'LayerNorm'; known layer kinds: RMSNorm"), std::string::npos) << m;
  m = message_of([&] { parse(R"({"RMSNorm": "rms_norm_reference"})"); });
  EXPECT_NE(m.find("must map devices (cpu, cuda, rocm)"), std::string::npos) << m;
  m = message_of([&] { parse(R"({"RMSNorm": {"npu": "rms_norm_reference"}})"); });
  EXPECT_NE(m.find("unknown device 'npu'"), std::string::npos) << m;
  m = message_of([&] { parse(R"({"RMSNorm": {"cpu": 3}})"); });
  EXPECT_NE(m.find("\"RMSNorm\".\"cpu\" must be a kernel name"), std::string::npos) << m;
  m = message_of([&] { parse(R"({"Attention": {"cpu": "flash"}})"); });
  EXPECT_NE(m.find("no Attention kernel 'flash' for cpu; registered: attention_sdpa, attention_eager"),
            std::string::npos)
      << m;
}

TEST(KernelConfig, ReadsAFile) {
  auto path = std::filesystem::temp_directory_path() / ("hf_kernel_config_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << R"({"SiLUAndMul": {"cpu": "silu_and_mul_reference"}})";
  EXPECT_EQ(KernelConfig::from_file(path).mapping.at(LayerKind::kSiLUAndMul).at("cpu"), "silu_and_mul_reference");
  std::ofstream(path) << R"({"SiLUAndMul": )";
  EXPECT_THROW(KernelConfig::from_file(path), Error);
  std::filesystem::remove(path);
  EXPECT_THROW(KernelConfig::from_file(path), Error);
}

TEST(KernelSelection, DefaultsAttentionKernelThenOverrides) {
  KernelSelection s = select_kernels("cpu", "");
  EXPECT_EQ(s.kernel(LayerKind::kAttention).name, "attention_sdpa");
  EXPECT_FALSE(s.eager_attention());
  ASSERT_TRUE(s.rms_norm && s.rope && s.silu_and_mul && s.attention);
  s = select_kernels("cpu", "attention_eager");
  EXPECT_TRUE(s.eager_attention());
  KernelConfig c;
  c.set(LayerKind::kAttention, "cpu", "attention_sdpa");
  c.set(LayerKind::kAttention, "cuda", "attention_eager");  // another device: ignored on cpu
  s = select_kernels("cpu", "attention_eager", &c);
  EXPECT_EQ(s.kernel(LayerKind::kAttention).name, "attention_sdpa");
  EXPECT_EQ(s.to_json()["Attention"], "attention_sdpa");
  EXPECT_EQ(s.to_json()["device"], "cpu");
  EXPECT_THROW(select_kernels("cpu", "attention_fused"), Error);
  if (built_gpu_key().empty()) {
    try {
      select_kernels("cuda", "");
      ADD_FAILURE() << "a CPU build selected GPU kernels";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("not built into this binary"), std::string::npos) << e.what();
    }
  }
}

TEST(KernelSelection, BatchedPathRopeAndAttentionChoicesAreRegisteredForGpus) {
  // The paged path's alternatives (docs/KERNELS.md): selectable per GPU
  // vendor, never defaults, unknown on the CPU (which has one paged kernel).
  for (const char* gpu : {"cuda", "rocm"}) {
    KernelConfig c;
    c.set(LayerKind::kRotaryEmbedding, gpu, "rotary_qkv_write");
    c.set(LayerKind::kAttention, gpu, "attention_paged_split");
    EXPECT_EQ(c.to_json()["RotaryEmbedding"][gpu], "rotary_qkv_write");
    bool rope = false, split = false;
    for (const KernelInfo& k : registered_kernels()) {
      if (k.device != gpu) continue;
      if (k.name == "rotary_qkv_write") rope = !k.is_default && k.layer == LayerKind::kRotaryEmbedding;
      if (k.name == "attention_paged_split") split = !k.is_default && !k.eager_attention && k.layer == LayerKind::kAttention;
    }
    EXPECT_TRUE(rope && split) << gpu;
  }
  KernelConfig cpu;
  EXPECT_THROW(cpu.set(LayerKind::kAttention, "cpu", "attention_paged_split"), Error);
  EXPECT_THROW(cpu.set(LayerKind::kRotaryEmbedding, "cpu", "rotary_qkv_write"), Error);
}

class KernelSelectionRun : public testing::RandomTest {};

TEST_F(KernelSelectionRun, TheChosenAttentionKernelRuns) {
  // eager fills probabilities; sdpa never does. Both give the same output.
  const int64_t T = 3, heads = 2, D = 4;
  Tensor q = random({T, heads * D});
  KVCacheView cache{Tensor::zeros(Shape{heads, T, D}, DType::kF32), Tensor::zeros(Shape{heads, T, D}, DType::kF32),
                    0};
  kv_cache_append(cache, random({T, heads * D}), random({T, heads * D}));
  std::vector<int64_t> pos{0, 1, 2};
  AttentionSpec spec;
  spec.heads = heads;
  spec.kv_heads = heads;
  spec.head_dim = D;
  spec.scale = 0.5f;
  Tensor out_e = Tensor::zeros(Shape{T, heads * D}, DType::kF32), out_s = out_e.clone();
  Tensor probs_e = Tensor::zeros(Shape{heads, T, T}, DType::kF32), probs_s = probs_e.clone();
  select_kernels("cpu", "attention_eager").attention(q, pos, cache, spec, out_e, &probs_e);
  select_kernels("cpu", "attention_sdpa").attention(q, pos, cache, spec, out_s, &probs_s);
  float psum = 0, ssum = 0, diff = 0;
  for (int64_t i = 0; i < probs_e.numel(); ++i) psum += probs_e.data<float>()[i], ssum += probs_s.data<float>()[i];
  for (int64_t i = 0; i < out_e.numel(); ++i)
    diff = std::max(diff, std::abs(out_e.data<float>()[i] - out_s.data<float>()[i]));
  EXPECT_NEAR(psum, heads * T, 1e-4);  // every row of probabilities sums to 1
  EXPECT_EQ(ssum, 0.0f);
  EXPECT_LT(diff, 1e-5);
}

}  // namespace
}  // namespace hipformers::kernels
