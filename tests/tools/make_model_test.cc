// `hipformers make-model`: the checkpoint it writes loads through the public
// API with the named shape, runs, is deterministic from --seed, and an
// existing directory is never written into.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hipformers/core/file.h"
#include "hipformers/core/json.h"
#include "hipformers/hipformers.h"
#include "hipformers/io/checkpoint.h"
#include "run_cli.h"
#include "test_paths.h"

namespace hipformers {
namespace {

namespace fs = std::filesystem;
using testing::expect_one_line_error;
using testing::run_cli;
using testing::shell_quote;

class MakeModel : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("hf_make_model_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  testing::CliResult make(const fs::path& out, const std::string& extra = "") {
    return run_cli("make-model --shape qwen3-mini --output " + shell_quote(out.string()) + " " + extra);
  }

  fs::path root_;
};


TEST_F(MakeModel, Qwen3MiniLoadsAndRuns) {
  const fs::path out = root_ / "mini";
  auto r = make(out, "--dtype float32 --tokenizer-dir " + shell_quote(testing::tokenizer_dir("qwen3").string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_EQ(r.out.rfind("wrote ", 0), 0u) << r.out;
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                        "tokenizer_config.json"})
    EXPECT_TRUE(fs::is_regular_file(out / f)) << f;

  const Json raw = read_json_file(out / "config.json");
  EXPECT_EQ(raw["architectures"], Json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(raw["model_type"], "qwen3");
  EXPECT_EQ(raw["torch_dtype"], "float32");
  EXPECT_EQ(raw["dtype"], "float32");

  PretrainedOptions load;
  load.device_map = "cpu";
  PreTrainedModel model = AutoModelForCausalLM::from_pretrained(out, load);
  const ModelConfig& c = model.config();
  EXPECT_EQ(c.architecture, Architecture::kQwen3);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{151645});
  ASSERT_TRUE(c.dtype.has_value());
  EXPECT_EQ(*c.dtype, DType::kF32);

  // Tied: no lm_head in the file; 2 layers x 11 tensors + embedding + final norm.
  Checkpoint ck = Checkpoint::open(out);
  EXPECT_EQ(ck.size(), 24u);
  EXPECT_EQ(ck.find("lm_head.weight"), nullptr);
  // Norm weights sit around 1, projections around 0.
  const TensorView& norm = ck.tensor("model.norm.weight");
  const float* nw = reinterpret_cast<const float*>(norm.data);
  double mean = 0;
  for (int i = 0; i < 64; ++i) mean += nw[i] / 64.0;
  EXPECT_NEAR(mean, 1.0, 0.1);

  // The real Qwen3 tokenizer and a forward over its ids.
  Tokenizer tokenizer = AutoTokenizer::from_pretrained(out);
  const std::vector<int32_t> ids = tokenizer.encode("The French Bread Law states");
  ASSERT_FALSE(ids.empty());
  Tensor logits = model.logits(ids);
  ASSERT_EQ(logits.ndim(), 2);
  EXPECT_EQ(logits.size(0), static_cast<int64_t>(ids.size()));
  EXPECT_EQ(logits.size(1), 151936);
  const float* l = logits.data<float>();
  for (int64_t i = 0; i < logits.numel(); ++i) ASSERT_TRUE(std::isfinite(l[i])) << i;

  GenerationOptions options;
  options.max_new_tokens = 5;
  options.min_new_tokens = 5;
  options.do_sample = false;
  EXPECT_EQ(model.generate(ids, options).size(), ids.size() + 5);
}

// generate --prompts-file: every line is a prompt of one batched run; one JSON
// line per prompt, in file order, each equal to generating that prompt alone.
TEST_F(MakeModel, GeneratePromptsFileBatchesAndMatchesSinglePrompts) {
  const fs::path out = root_ / "mini";
  ASSERT_EQ(make(out, "--dtype float32 --tokenizer-dir " + shell_quote(testing::tokenizer_dir("qwen3").string()))
                .exit_code,
            0);
  const fs::path prompts = root_ / "prompts.txt";
  std::ofstream(prompts) << "The French Bread Law states\n\nHello\r\nA much longer prompt about bread and the law\n";
  const std::string common = "generate --model " + shell_quote(out.string()) + " --device cpu --max-new-tokens 6 --json";
  auto r = run_cli(common + " --prompts-file " + shell_quote(prompts.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<Json> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(Json::parse(line));
  ASSERT_EQ(lines.size(), 3u) << r.out;
  const char* texts[] = {"The French Bread Law states", "Hello", "A much longer prompt about bread and the law"};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[i]["index"], i);
    EXPECT_EQ(lines[i]["ids"].size(), 6u);
    EXPECT_EQ(lines[i]["stop_reason"], "max_new_tokens");
    auto single = run_cli(common + " --prompt " + shell_quote(texts[i]));
    ASSERT_EQ(single.exit_code, 0) << single.err;
    EXPECT_EQ(Json::parse(single.out)["ids"], lines[i]["ids"]) << texts[i];
  }
  // Bad input: no prompts, invalid UTF-8, a missing file, without --json.
  std::ofstream(root_ / "empty.txt") << "\n\n";
  expect_one_line_error(run_cli(common + " --prompts-file " + shell_quote((root_ / "empty.txt").string())),
                        "no prompts");
  std::ofstream(root_ / "bad.txt") << "fine\n\xff\xfe\n";
  expect_one_line_error(run_cli(common + " --prompts-file " + shell_quote((root_ / "bad.txt").string())),
                        "prompt 1");
  expect_one_line_error(run_cli(common + " --prompts-file " + shell_quote((root_ / "nope.txt").string())), "nope.txt");
  expect_one_line_error(run_cli("generate --model " + shell_quote(out.string()) + " --device cpu --prompts-file " +
                                shell_quote(prompts.string())),
                        "--json");
}

TEST_F(MakeModel, SameSeedSameBytesOtherSeedOtherBytes) {
  ASSERT_EQ(make(root_ / "a", "--seed 7").exit_code, 0);
  ASSERT_EQ(make(root_ / "b", "--seed 7").exit_code, 0);
  ASSERT_EQ(make(root_ / "c", "--seed 8").exit_code, 0);
  const std::string a = read_file(root_ / "a" / "model.safetensors");
  EXPECT_EQ(a, read_file(root_ / "b" / "model.safetensors"));
  EXPECT_NE(a, read_file(root_ / "c" / "model.safetensors"));
  EXPECT_EQ(read_file(root_ / "a" / "config.json"), read_file(root_ / "b" / "config.json"));
  // The default dtype is Qwen3's own, bfloat16.
  EXPECT_EQ(read_json_file(root_ / "a" / "config.json")["torch_dtype"], "bfloat16");
  EXPECT_EQ(Checkpoint::open(root_ / "a").tensor("model.embed_tokens.weight").dtype, DType::kBF16);
}

TEST_F(MakeModel, RefusesExistingNonEmptyDirectory) {
  const fs::path out = root_ / "taken";
  fs::create_directories(out);
  std::ofstream(out / "notes.txt") << "mine";
  expect_one_line_error(make(out), "not empty");
  EXPECT_EQ(read_file(out / "notes.txt"), "mine");
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));

  // A previous make-model result is refused too.
  ASSERT_EQ(make(root_ / "done").exit_code, 0);
  expect_one_line_error(make(root_ / "done"), "not empty");

  // A file where the directory should be.
  std::ofstream(root_ / "file") << "x";
  expect_one_line_error(make(root_ / "file"), "not a directory");

  // An empty directory is fine.
  fs::create_directories(root_ / "empty");
  EXPECT_EQ(make(root_ / "empty").exit_code, 0);
}

TEST_F(MakeModel, BadArgumentsAreOneLineErrors) {
  expect_one_line_error(run_cli("make-model --shape qwen3-huge --output " + shell_quote((root_ / "x").string())),
                        "qwen3-mini");
  expect_one_line_error(make(root_ / "x", "--dtype int8"), "--dtype");
  expect_one_line_error(make(root_ / "x", "--std -1"), "--std");
  expect_one_line_error(make(root_ / "x", "--tokenizer-dir " + shell_quote((root_ / "nowhere").string())),
                        "nowhere");
  expect_one_line_error(run_cli("make-model --shape qwen3-mini"), "--output");
  // Nothing was written for a refused command.
  EXPECT_FALSE(fs::exists(root_ / "x"));
}

}  // namespace
}  // namespace hipformers
