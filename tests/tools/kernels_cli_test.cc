// `hipformers kernels`, and --attn / --use-kernels / --kernel-config of
// generate and logits on the tiny committed models (CPU).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hipformers/core/json.h"
#include "run_cli.h"
#include "test_paths.h"

namespace hipformers {
namespace {

using testing::expect_one_line_error;
using testing::run_cli;
using testing::shell_quote;

std::string tiny() { return shell_quote(testing::test_data("models/qwen3-tiny").string()); }



std::string generate(const std::string& extra) {
  return "generate --model " + tiny() + " --device cpu --dtype float32 --token-ids 1,2,3 --max-new-tokens 3 --json " + extra;
}

TEST(CliKernels, JsonListsEveryDevice) {
  auto r = run_cli("kernels --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json j = parse_json(r.out, "kernels --json");
  for (const char* device : {"cpu", "cuda", "rocm"}) {
    ASSERT_TRUE(j.contains(device)) << r.out;
    for (const char* layer : {"RMSNorm", "RotaryEmbedding", "SiLUAndMul", "Attention"}) {
      ASSERT_TRUE(j[device].contains(layer)) << device << " " << layer;
      EXPECT_FALSE(j[device][layer]["kernels"].empty());
    }
  }
  EXPECT_EQ(j["cpu"]["RMSNorm"]["default"], "rms_norm_reference");
  EXPECT_EQ(j["cuda"]["RMSNorm"]["default"], "rms_norm_fused_residual");
  EXPECT_EQ(j["rocm"]["Attention"]["default"], "attention_fused");
  EXPECT_EQ(j["cpu"]["Attention"]["kernels"][1]["name"], "attention_eager");
  EXPECT_EQ(j["cpu"]["Attention"]["kernels"][0]["available"], true);
  EXPECT_EQ(j["cpu"]["attention_backends"], Json::array({"eager", "sdpa"}));
  EXPECT_EQ(j["rocm"]["attention_backends"].back(), "kernels-community/aiter-flash-attn");
}

TEST(CliKernels, TextListsDefaults) {
  auto r = run_cli("kernels");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cpu:\n  RMSNorm: rms_norm_reference (default), rms_norm_in_projection\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  attention backends: eager, sdpa\n"), std::string::npos) << r.out;
}

TEST(CliKernels, GenerateReportsTheResolvedBackend) {
  auto r = run_cli(generate(""));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json j = parse_json(r.out, "generate --json");
  EXPECT_EQ(j["attn_implementation"], "sdpa");
  EXPECT_EQ(j["kernels"]["Attention"], "attention_sdpa");
  EXPECT_EQ(j["kernels"]["device"], "cpu");

  auto e = run_cli(generate("--attn eager"));
  ASSERT_EQ(e.exit_code, 0) << e.err;
  Json je = parse_json(e.out, "generate --json");
  EXPECT_EQ(je["attn_implementation"], "eager");
  EXPECT_EQ(je["kernels"]["Attention"], "attention_eager");
  EXPECT_EQ(je["ids"], j["ids"]);  // float32: eager and sdpa agree on greedy ids
}

TEST(CliKernels, FlashAttentionOnCpuListsWhatExists) {
  expect_one_line_error(run_cli(generate("--attn flash_attention_2")),
                        "attention implementation 'flash_attention_2' is not available on cpu; available on cpu: "
                        "eager, sdpa");
  expect_one_line_error(run_cli("logits --model " + tiny() + " --device cpu --token-ids 1,2 --output " +
                                shell_quote(testing::scratch_path("l.safetensors").string()) +
                                " --attn kernels-community/flash-attn"),
                        "available on cpu: eager, sdpa");
  expect_one_line_error(run_cli(generate("--attn nope")), "unknown attention implementation 'nope'");
}

TEST(CliKernels, KernelConfigIsHonouredAndValidated) {
  auto config = testing::scratch_path("kernels.json");
  std::ofstream(config) << R"({"Attention": {"cpu": "attention_eager"}, "RMSNorm": {"cuda": "rms_norm_fused_residual"}})";
  auto r = run_cli(generate("--use-kernels --kernel-config " + shell_quote(config.string())));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_json(r.out, "generate")["kernels"]["Attention"], "attention_eager");

  auto plain = run_cli(generate("--use-kernels"));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(parse_json(plain.out, "generate")["kernels"]["RMSNorm"], "rms_norm_reference");

  auto bad = testing::scratch_path("bad.json");
  std::ofstream(bad) << R"({"RMSNorm": {"cpu": "rms_norm_triton"}})";
  expect_one_line_error(run_cli(generate("--use-kernels --kernel-config " + shell_quote(bad.string()))),
                        "no RMSNorm kernel 'rms_norm_triton' for cpu; registered: rms_norm_reference");
  std::ofstream(bad) << R"({"LayerNorm": {}})";
  expect_one_line_error(run_cli(generate("--use-kernels --kernel-config " + shell_quote(bad.string()))),
                        "known layer kinds: RMSNorm, RotaryEmbedding, SiLUAndMul, Attention");
  // --kernel-config needs --use-kernels.
  auto no_flag = run_cli(generate("--kernel-config " + shell_quote(config.string())));
  EXPECT_EQ(no_flag.exit_code, 2) << no_flag.err;
  EXPECT_NE(no_flag.err.find("--use-kernels"), std::string::npos) << no_flag.err;
}

}  // namespace
}  // namespace hipformers
