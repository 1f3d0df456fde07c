// `hipformers bench`: --json prints one object with the benchmark's fields on
// a tiny model; bad input is one line on stderr and exit code 2;
// --make-model writes the same checkpoint as make-model.
#include <gtest/gtest.h>

#include <filesystem>

#include "hipformers/core/json.h"
#include "run_cli.h"
#include "test_paths.h"
#include "test_util.h"

namespace hipformers {
namespace {

using testing::expect_one_line_error;
using testing::run_cli;
using testing::shell_quote;

std::string tiny() { return shell_quote(testing::test_data("models/qwen3-tiny").string()); }


TEST(BenchCli, JsonOnTinyModel) {
  auto r = run_cli("bench --model " + tiny() +
                   " --device cpu --batch 2 --prompt-len 6 --gen-len 3 --warmup 1 --repeat 2 --copy-mib 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  ASSERT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line expected: " << r.out;
  const Json j = parse_json(r.out, "bench output");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["batch"], 2);
  EXPECT_EQ(j["prompt_len"], 6);
  EXPECT_EQ(j["gen_len"], 3);
  EXPECT_EQ(j["batched"], true);
  EXPECT_FALSE(j["hipformers_version"].get<std::string>().empty());
  for (const char* key : {"prefill_tokens_per_s", "decode_tokens_per_s", "ms_per_decode_step", "peak_memory_bytes",
                          "copy_bandwidth_gb_per_s", "bandwidth_fraction"})
    EXPECT_GT(j[key].get<double>(), 0) << key;
}

TEST(BenchCli, TextOnTinyModel) {
  auto r = run_cli("bench --model " + tiny() + " --device cpu --prompt-len 4 --gen-len 2 --repeat 1 --copy-mib 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("decode:"), std::string::npos) << r.out;
}

TEST(BenchCli, BadInputExits2) {
  expect_one_line_error(run_cli("bench --model " + tiny() + " --device cpu --batch 0"), "--batch");
  expect_one_line_error(run_cli("bench --model " + tiny() + " --device cpu --gen-len 1"), "--gen-len");
  expect_one_line_error(run_cli("bench --model " + tiny() + " --device cpu --dtype int7"), "--dtype");
  expect_one_line_error(run_cli("bench --model /nonexistent/model --device cpu"), "/nonexistent/model");
  expect_one_line_error(run_cli("bench --device cpu"), "--model");
  expect_one_line_error(run_cli("bench --make-model qwen3-mini"), "--output");
  expect_one_line_error(run_cli("bench --make-model nope --output /tmp/hf_bench_never_written"), "nope");
  EXPECT_FALSE(std::filesystem::exists("/tmp/hf_bench_never_written"));
  // --attn resolves like generate's: a GPU-only backend on the CPU is refused, listing what exists.
  expect_one_line_error(run_cli("bench --model " + tiny() + " --device cpu --attn flash_attention_3"),
                        "available on cpu: eager, sdpa");
  expect_one_line_error(run_cli("bench --model " + tiny() + " --device cpu --attn nope"), "nope");
}

TEST(BenchCli, EagerAttention) {
  auto r = run_cli("bench --model " + tiny() +
                   " --device cpu --attn eager --prompt-len 4 --gen-len 2 --repeat 1 --copy-mib 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_json(r.out, "bench output")["attn_implementation"], "eager");
}

TEST(BenchCli, MakeModelAlias) {
  testing::TempDir dir("hf_bench_cli");
  const auto out = dir.path() / "mini";
  auto r = run_cli("bench --make-model qwen3-mini --dtype float32 --output " + shell_quote(out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("wrote ", 0), 0u) << r.out;
  // Same bytes as make-model with the same arguments.
  const auto ref = dir.path() / "ref";
  ASSERT_EQ(run_cli("make-model --shape qwen3-mini --dtype float32 --output " + shell_quote(ref.string())).exit_code, 0);
  EXPECT_EQ(std::filesystem::file_size(out / "model.safetensors"), std::filesystem::file_size(ref / "model.safetensors"));
  auto b = run_cli("bench --model " + shell_quote(out.string()) +
                   " --device cpu --prompt-len 4 --gen-len 2 --warmup 0 --repeat 1 --copy-mib 1 --json");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(parse_json(b.out, "bench")["model_type"], "qwen3");
}

}  // namespace
}  // namespace hipformers
