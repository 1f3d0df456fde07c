// The CLI's contract: exact stdout, and for bad input one line on stderr and
// exit code 2.
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

std::string qwen3() { return shell_quote(testing::tokenizer_dir("qwen3").string()); }


void write(const std::filesystem::path& p, const std::string& content) {
  std::ofstream(p, std::ios::binary) << content;
}


// The CPU build reports no GPU stack; a GPU build (run in CI only as the
// CPU build) reports its own stack's version and as many devices as it lists.
TEST(CliEnv, ReportsTheBuild) {
  auto r = run_cli("env", "-u CUDA_VISIBLE_DEVICES -u HIP_VISIBLE_DEVICES -u ROCR_VISIBLE_DEVICES");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hipformers version: "), std::string::npos);
  if (r.out.find("backend: cpu\n") != std::string::npos) {
    EXPECT_NE(r.out.find("HIP version: none\n"), std::string::npos);
    EXPECT_NE(r.out.find("CUDA version: none\n"), std::string::npos);
    EXPECT_NE(r.out.find("GPU available: False\n"), std::string::npos);
    EXPECT_NE(r.out.find("device count: 0\n"), std::string::npos);
  } else if (r.out.find("backend: cuda\n") != std::string::npos) {
    EXPECT_EQ(r.out.find("CUDA version: none\n"), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("backend: hip\n"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("HIP version: none\n"), std::string::npos) << r.out;
  }
}

TEST(CliEnv, JsonIsOneObject) {
  auto r = run_cli("env --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json j = parse_json(r.out, "env --json");
  ASSERT_TRUE(j["devices"].is_array());
  EXPECT_EQ(j["device_count"], j["devices"].size());
  EXPECT_EQ(j["gpu_available"], !j["devices"].empty());
  if (j["backend"] == "cpu") {
    EXPECT_TRUE(j["hip_version"].is_null());
    EXPECT_TRUE(j["cuda_version"].is_null());
    EXPECT_EQ(j["device_count"], 0);
  } else if (j["backend"] == "cuda") {
    EXPECT_TRUE(j["cuda_version"].is_string()) << r.out;
  } else {
    EXPECT_EQ(j["backend"], "hip");
    EXPECT_TRUE(j["hip_version"].is_string()) << r.out;
  }
}

TEST(CliEnv, MalformedVisibleDevicesIsOneLineError) {
  expect_one_line_error(run_cli("env", "CUDA_VISIBLE_DEVICES=0,,1"), "CUDA_VISIBLE_DEVICES");
  expect_one_line_error(run_cli("devices", "CUDA_VISIBLE_DEVICES=1,1"), "listed twice");
}

TEST(CliDevices, NoGpuOnCpuBuild) {
  auto r = run_cli("devices");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("no GPU visible", 0), 0u) << r.out;
  auto j = run_cli("devices --json");
  EXPECT_EQ(parse_json(j.out, "devices --json"), Json::array());
}

TEST(CliTokenize, PrintsIdsAndJson) {
  auto r = run_cli("tokenize --model " + qwen3() + " 'Hello world'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "9707,1879\n");
  auto j = run_cli("tokenize --json --model " + qwen3() + " 'Hello world'");
  EXPECT_EQ(j.out, "{\"ids\":[9707,1879]}\n");
}

TEST(CliTokenize, ReadsFileExactly) {
  auto p = testing::scratch_path("text.txt");
  write(p, "Hello world\n");
  auto r = run_cli("tokenize --model " + qwen3() + " --file " + shell_quote(p.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "9707,1879,198\n");
}

TEST(CliTokenize, BadInputExitsTwo) {
  auto p = testing::scratch_path("bad.txt");
  write(p, "ok \xff\xfe bad");
  expect_one_line_error(run_cli("tokenize --model " + qwen3() + " --file " + shell_quote(p.string())),
                        "invalid UTF-8 at byte offset 3");
  expect_one_line_error(run_cli("tokenize --model /nonexistent/model 'hi'"), "/nonexistent/model");
  expect_one_line_error(run_cli("tokenize --model " + qwen3() + " --file /nonexistent.txt"), "/nonexistent.txt");
  auto corrupt = testing::scratch_path("corrupt_model");
  std::filesystem::create_directories(corrupt);
  write(corrupt / "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {");
  expect_one_line_error(run_cli("tokenize --model " + shell_quote(corrupt.string()) + " hi"), "tokenizer.json");
  expect_one_line_error(run_cli("frobnicate"), "frobnicate");
}

TEST(CliDetokenize, DecodesAndChecksRange) {
  auto r = run_cli("detokenize --model " + qwen3() + " 9707,1879");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Hello world");
  auto special = run_cli("detokenize --model " + qwen3() + " --skip-special-tokens '[151644, 9707]'");
  EXPECT_EQ(special.out, "Hello");
  auto spaced = run_cli("detokenize --model " + qwen3() + " 151644 9707");
  EXPECT_EQ(spaced.out, "<|im_start|>Hello");
  expect_one_line_error(run_cli("detokenize --model " + qwen3() + " 9707,999999"), "999999");
  expect_one_line_error(run_cli("detokenize --model " + qwen3() + " 12,abc"), "abc");
}

TEST(CliChatTemplate, RendersExactlyAndValidates) {
  auto messages = testing::scratch_path("messages.json");
  write(messages, R"([{"role": "user", "content": "Hi there"}])");
  auto r = run_cli("chat-template --model " + qwen3() + " --messages " + shell_quote(messages.string()) +
                   " --add-generation-prompt --enable-thinking false");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  auto plain = run_cli("chat-template --model " + qwen3() + " --messages " + shell_quote(messages.string()));
  EXPECT_EQ(plain.out, "<|im_start|>user\nHi there<|im_end|>\n");

  auto bad = testing::scratch_path("bad_messages.json");
  write(bad, R"([{"role": "user", "content": "Hi"},])");
  expect_one_line_error(run_cli("chat-template --model " + qwen3() + " --messages " + shell_quote(bad.string())),
                        "invalid JSON");
  write(bad, R"({"not_messages": 1})");
  expect_one_line_error(run_cli("chat-template --model " + qwen3() + " --messages " + shell_quote(bad.string())),
                        "messages");
  expect_one_line_error(run_cli("chat-template --model " + qwen3() + " --messages " + shell_quote(messages.string()) +
                                " --enable-thinking maybe"),
                        "maybe");
}

}  // namespace
}  // namespace hipformers
