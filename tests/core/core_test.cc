#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hipformers/core/dtype.h"
#include "hipformers/core/error.h"
#include "hipformers/core/file.h"
#include "hipformers/core/json.h"

namespace hipformers {
namespace {

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("hf_core_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(DType, NamesAndSizesRoundTrip) {
  const char* names[] = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "I64", "I32", "I16", "I8", "U8", "BOOL"};
  const std::size_t sizes[] = {8, 4, 2, 2, 1, 1, 8, 4, 2, 1, 1, 1};
  for (int i = 0; i < 12; ++i) {
    auto d = parse_dtype(names[i]);
    ASSERT_TRUE(d.has_value()) << names[i];
    EXPECT_STREQ(dtype_name(*d), names[i]);
    EXPECT_EQ(dtype_size(*d), sizes[i]);
    EXPECT_EQ(parse_torch_dtype(dtype_torch_name(*d)), d);
  }
  EXPECT_FALSE(parse_dtype("F4").has_value());
  EXPECT_EQ(parse_torch_dtype("torch.bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_torch_dtype("half"), DType::kF16);
  EXPECT_FALSE(parse_torch_dtype("complex64").has_value());
}

TEST(File, MissingFileIsNotFoundNamingPath) {
  try {
    read_file("/nonexistent/dir/file.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/file.json"), std::string::npos);
  }
  EXPECT_THROW(MappedFile::open("/nonexistent"), Error);
  EXPECT_THROW(read_file(temp_dir()), Error);  // a directory is not a file
}

TEST(File, AtomicWriteReplacesWholeFileAndMapsBack) {
  auto path = temp_dir() / "data.bin";
  std::string first(1000, 'a'), second = "short";
  write_file_atomic(path, first.data(), first.size());
  write_file_atomic(path, second.data(), second.size());
  EXPECT_EQ(read_file(path), second);
  auto mapped = MappedFile::open(path);
  ASSERT_EQ(mapped->size(), second.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped->data()), mapped->size()), second);
  for (const auto& entry : std::filesystem::directory_iterator(path.parent_path()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << "temporary file left behind";
  EXPECT_THROW(write_file_atomic("/nonexistent/dir/out.bin", "x", 1), Error);
}

TEST(Json, CorruptJsonNamesFile) {
  auto path = temp_dir() / "bad.json";
  std::ofstream(path) << "{\"a\": [1, 2,}";
  try {
    read_json_file(path);
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(msg.find(path.string() + ": invalid JSON: "), 0u) << msg;
  }
  // A number too large for a double is bad input too, not a crash (fuzzer finding).
  EXPECT_THROW(parse_json("{\"a\": 7777E7777777777777777777}", "overflow"), Error);
  EXPECT_THROW(parse_ordered_json("[1e999999]", "overflow"), Error);
  auto ordered = parse_ordered_json(R"({"z": 1, "a": 2})", "inline");
  EXPECT_EQ(ordered.begin().key(), "z");  // document order preserved
}

}  // namespace
}  // namespace hipformers
