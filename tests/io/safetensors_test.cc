#include "hipformers/io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/core/file.h"
#include "test_paths.h"
#include "test_util.h"

namespace hipformers {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::TempDir;


std::vector<std::byte> to_bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

// 8-byte LE length + header (not padded unless the caller pads) + data.
std::vector<std::byte> image(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return to_bytes(out + header + data);
}

struct Caught {
  bool thrown = false;
  ErrorKind kind = ErrorKind::kRuntime;
  std::string message;
};

template <typename F>
Caught catch_error(F&& f) {
  Caught c;
  try {
    f();
  } catch (const Error& e) {
    c.thrown = true;
    c.kind = e.kind();
    c.message = e.what();
  }
  return c;
}

Caught parse_error(const std::vector<std::byte>& bytes) {
  return catch_error([&] { SafetensorsFile::parse(bytes, "model.safetensors"); });
}

#define EXPECT_MESSAGE_HAS(caught, text)                                           \
  do {                                                                             \
    EXPECT_TRUE((caught).thrown) << "no hipformers::Error thrown";                 \
    EXPECT_NE((caught).message.find(text), std::string::npos) << (caught).message; \
  } while (0)

// ---- Reading a file laid out byte-for-byte like Hugging Face's writer ----------

TEST(Safetensors, ReadsHandWrittenHfLayout) {
  auto file = SafetensorsFile::open(testing::test_data("io/hf_layout.safetensors"));
  ASSERT_EQ(file.tensors().size(), 4u);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  // File order (by offset).
  EXPECT_EQ(file.tensors()[0].name, "ids");
  EXPECT_EQ(file.tensors()[1].name, "weight");
  EXPECT_EQ(file.tensors()[2].name, "bias");
  EXPECT_EQ(file.tensors()[3].name, "flag");

  const TensorView& w = file.tensor("weight");
  EXPECT_EQ(w.dtype, DType::kF32);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w.numel(), 6);
  ASSERT_EQ(w.nbytes, 24u);
  float values[6];
  std::memcpy(values, w.data, sizeof(values));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(values[i], static_cast<float>(i));

  const TensorView& ids = file.tensor("ids");
  int64_t id_values[2];
  std::memcpy(id_values, ids.data, sizeof(id_values));
  EXPECT_EQ(id_values[0], -1);
  EXPECT_EQ(id_values[1], 151645);

  const TensorView& bias = file.tensor("bias");
  EXPECT_EQ(bias.dtype, DType::kBF16);
  EXPECT_EQ(bias.nbytes, 6u);
  EXPECT_EQ(static_cast<unsigned char>(bias.data[1]), 0x3f);

  const TensorView& flag = file.tensor("flag");
  EXPECT_EQ(flag.dtype, DType::kBool);
  EXPECT_TRUE(flag.shape.empty());
  EXPECT_EQ(flag.numel(), 1);
  EXPECT_EQ(static_cast<unsigned char>(flag.data[0]), 1);
  // HF's writer aligns the data section to 8 bytes; views are inside the mapping.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ids.data) % 8, 0u);

  EXPECT_EQ(file.find("missing"), nullptr);
  auto c = catch_error([&] { file.tensor("model.norm.weight"); });
  EXPECT_EQ(c.kind, ErrorKind::kNotFound);
  EXPECT_MESSAGE_HAS(c, "hf_layout.safetensors");
  EXPECT_MESSAGE_HAS(c, "'model.norm.weight'");
}

TEST(Safetensors, WriterReproducesHfBytesExactly) {
  TempDir dir;
  int64_t ids[2] = {-1, 151645};
  float weight[6] = {0, 1, 2, 3, 4, 5};
  unsigned char bias[6] = {0x80, 0x3f, 0x00, 0x40, 0x40, 0xc0};
  unsigned char flag = 1;
  // Deliberately out of layout order.
  std::vector<TensorToWrite> tensors = {
      {"flag", DType::kBool, {}, &flag, 1},
      {"bias", DType::kBF16, {3}, bias, 6},
      {"weight", DType::kF32, {2, 3}, weight, 24},
      {"ids", DType::kI64, {2}, ids, 16},
  };
  fs::path out = dir.path() / "model.safetensors";
  save_safetensors(out, tensors, {{"format", "pt"}});
  EXPECT_EQ(read_file(out), read_file(testing::test_data("io/hf_layout.safetensors")));
}

// hf_written_all_dtypes.safetensors was written by Hugging Face's Python
// `safetensors` 0.8.0 (safetensors.torch.save_file) from tensors whose bytes are
// (i * 7 + k) & mask; we must read it and write the very same bytes.
TEST(Safetensors, ReadsAndReproducesFileWrittenByHfPython) {
  TempDir dir;
  const DType all[] = {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF8E5M2,
                       DType::kI64, DType::kI32, DType::kI16, DType::kI8,   DType::kU8,     DType::kBool};
  std::vector<std::vector<unsigned char>> bufs;
  std::vector<TensorToWrite> tensors;
  int k = 0;
  for (DType d : all) {
    size_t n = 6 * dtype_size(d);
    std::vector<unsigned char> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>((i * 7 + k) & (d == DType::kBool ? 1 : 0x3f));
    bufs.push_back(std::move(b));
    tensors.push_back({std::string("t.") + dtype_name(d), d, {2, 3}, bufs.back().data(), n});
    ++k;
  }
  float scalar = 2.5f;
  tensors.push_back({"scalar", DType::kF32, {}, &scalar, 4});
  tensors.push_back({"empty", DType::kF16, {0, 5}, nullptr, 0});

  fs::path hf = testing::test_data("io/hf_written_all_dtypes.safetensors");
  auto file = SafetensorsFile::open(hf);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("k"), "v");
  for (const auto& t : tensors) {
    const TensorView& v = file.tensor(t.name);
    EXPECT_EQ(v.dtype, t.dtype) << t.name;
    EXPECT_EQ(v.shape, t.shape) << t.name;
    ASSERT_EQ(v.nbytes, t.nbytes) << t.name;
    if (t.nbytes) {
      EXPECT_EQ(std::memcmp(v.data, t.data, t.nbytes), 0) << t.name;
    }
  }
  fs::path ours = dir.path() / "ours.safetensors";
  save_safetensors(ours, tensors, {{"format", "pt"}, {"k", "v"}});
  EXPECT_EQ(read_file(ours), read_file(hf));
}

// ---- Round trips -----------------------------------------------------------------

TEST(Safetensors, RoundTripEveryDType) {
  TempDir dir;
  const DType all[] = {DType::kF64,    DType::kF32,    DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF8E5M2,
                       DType::kI64,    DType::kI32,    DType::kI16, DType::kI8,   DType::kU8,     DType::kBool};
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<TensorToWrite> tensors;
  int k = 0;
  for (DType d : all) {
    std::vector<int64_t> shape = {2, 3, k % 3 + 1};
    size_t n = 6 * static_cast<size_t>(k % 3 + 1) * dtype_size(d);
    std::vector<unsigned char> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<unsigned char>(i * 7 + k);
    if (d == DType::kBool)
      for (auto& b : buf) b &= 1;
    buffers.push_back(std::move(buf));
    tensors.push_back({std::string("t.") + dtype_name(d), d, shape, buffers.back().data(), n});
    ++k;
  }
  fs::path out = dir.path() / "all.safetensors";
  save_safetensors(out, tensors, {{"format", "pt"}, {"note", "ünïcode ✓"}});

  auto file = SafetensorsFile::open(out);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  EXPECT_EQ(file.metadata().at("note"), "ünïcode ✓");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& v = file.tensor(tensors[i].name);
    EXPECT_EQ(v.dtype, tensors[i].dtype) << v.name;
    EXPECT_EQ(v.shape, tensors[i].shape) << v.name;
    ASSERT_EQ(v.nbytes, tensors[i].nbytes) << v.name;
    EXPECT_EQ(std::memcmp(v.data, tensors[i].data, v.nbytes), 0) << v.name;
    // Largest element size first => every tensor aligned to its element size.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % dtype_size(v.dtype), 0u) << v.name;
  }
  // Layout order: non-increasing element size.
  for (size_t i = 1; i < file.tensors().size(); ++i)
    EXPECT_GE(dtype_size(file.tensors()[i - 1].dtype), dtype_size(file.tensors()[i].dtype));
  // The header length is a multiple of 8.
  std::string raw = read_file(out);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(raw[8], '{');
}

TEST(Safetensors, RoundTripEmptyAndScalarTensors) {
  TempDir dir;
  float scalar = 3.5f;
  std::vector<TensorToWrite> tensors = {
      {"empty", DType::kF32, {0, 4}, nullptr, 0},
      {"empty2", DType::kF16, {3, 0}, nullptr, 0},
      {"scalar", DType::kF32, {}, &scalar, 4},
  };
  fs::path out = dir.path() / "x.safetensors";
  save_safetensors(out, tensors);
  auto file = SafetensorsFile::open(out);
  EXPECT_TRUE(file.metadata().empty());
  EXPECT_EQ(file.tensor("empty").numel(), 0);
  EXPECT_EQ(file.tensor("empty").nbytes, 0u);
  EXPECT_EQ(file.tensor("empty").shape, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(file.tensor("empty2").shape, (std::vector<int64_t>{3, 0}));
  const TensorView& s = file.tensor("scalar");
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(s.numel(), 1);
  float got = 0;
  std::memcpy(&got, s.data, 4);
  EXPECT_EQ(got, 3.5f);
}

TEST(Safetensors, EmptyFileWithNoTensors) {
  TempDir dir;
  fs::path out = dir.path() / "none.safetensors";
  save_safetensors(out, std::span<const TensorToWrite>{});
  auto file = SafetensorsFile::open(out);
  EXPECT_TRUE(file.tensors().empty());
  EXPECT_EQ(read_file(out).size(), 16u);  // 8 + "{}" padded to 8
}

TEST(Safetensors, OverwriteIsAtomicAndLeavesNoTemporaries) {
  TempDir dir;
  fs::path out = dir.path() / "model.safetensors";
  float a[2] = {1, 2};
  std::vector<TensorToWrite> first = {{"a", DType::kF32, {2}, a, 8}};
  save_safetensors(out, first);
  // A failing write (size mismatch) must leave the old file intact.
  std::vector<TensorToWrite> bad = {{"a", DType::kF32, {3}, a, 8}};
  EXPECT_THROW(save_safetensors(out, bad), Error);
  EXPECT_EQ(SafetensorsFile::open(out).tensor("a").nbytes, 8u);
  int count = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    (void)e;
    ++count;
  }
  EXPECT_EQ(count, 1);
}

TEST(Safetensors, ParseFromMemoryViewsCallerBuffer) {
  std::string header = R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  auto bytes = image(header, "ABCD");
  auto file = SafetensorsFile::parse(bytes, "mem");
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[0].name, "a");  // sorted by offset, not header order
  EXPECT_EQ(file.tensor("b").data, bytes.data() + 8 + header.size() + 2);
  EXPECT_EQ(file.path(), fs::path("mem"));
}

TEST(Safetensors, AcceptsTrailingSpacesAndNullMetadataAndSharedEmptyOffsets) {
  std::string header =
      R"({"__metadata__":null,"e1":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
      R"("x":{"shape":[1],"dtype":"I8","data_offsets":[0,1]},"e2":{"dtype":"F32","shape":[0],"data_offsets":[1,1]}}    )";
  auto file = SafetensorsFile::parse(image(header, "Z"), "m");
  EXPECT_EQ(file.tensors().size(), 3u);
  EXPECT_TRUE(file.metadata().empty());
}

// ---- Writer validation -----------------------------------------------------------

TEST(SafetensorsWrite, RejectsBadInputNamingTensor) {
  TempDir dir;
  fs::path out = dir.path() / "w.safetensors";
  float d[4] = {};
  auto err = [&](std::vector<TensorToWrite> t, std::map<std::string, std::string> meta = {}) {
    return catch_error([&] { save_safetensors(out, t, meta); });
  };
  auto c = err({{"w", DType::kF32, {2, 3}, d, 16}});
  EXPECT_MESSAGE_HAS(c, "tensor 'w'");
  EXPECT_MESSAGE_HAS(c, "needs 24 bytes but 16 were given");
  EXPECT_MESSAGE_HAS(c, "w.safetensors");
  c = err({{"neg", DType::kF32, {-1}, d, 4}});
  EXPECT_MESSAGE_HAS(c, "tensor 'neg'");
  EXPECT_MESSAGE_HAS(c, "negative");
  c = err({{"dup", DType::kF32, {1}, d, 4}, {"dup", DType::kF32, {1}, d, 4}});
  EXPECT_MESSAGE_HAS(c, "duplicate");
  c = err({{"__metadata__", DType::kF32, {1}, d, 4}});
  EXPECT_MESSAGE_HAS(c, "reserved");
  c = err({{"null", DType::kF32, {1}, nullptr, 4}});
  EXPECT_MESSAGE_HAS(c, "null");
  c = err({{"big", DType::kF64, {INT64_MAX, 4}, d, 4}});
  EXPECT_MESSAGE_HAS(c, "overflow");
  c = err({{std::string("bad\xff", 4), DType::kF32, {1}, d, 4}});
  EXPECT_MESSAGE_HAS(c, "UTF-8");
  c = err({}, {{"k", std::string("\xc0\x80", 2)}});
  EXPECT_MESSAGE_HAS(c, "UTF-8");
  EXPECT_FALSE(fs::exists(out));
}

TEST(SafetensorsWrite, MissingDirectoryIsNotFound) {
  float d = 0;
  std::vector<TensorToWrite> t = {{"a", DType::kF32, {}, &d, 4}};
  auto c = catch_error([&] { save_safetensors("/nonexistent-dir-hf/x.safetensors", t); });
  EXPECT_EQ(c.kind, ErrorKind::kNotFound);
  EXPECT_MESSAGE_HAS(c, "/nonexistent-dir-hf/x.safetensors");
}

// ---- Reader validation: every error names the file (and tensor) ------------------

TEST(SafetensorsValidate, TooSmall) {
  auto c = parse_error(to_bytes("abc"));
  EXPECT_EQ(c.kind, ErrorKind::kInvalidInput);
  EXPECT_MESSAGE_HAS(c, "model.safetensors: ");
  EXPECT_MESSAGE_HAS(c, "too small");
  c = parse_error({});
  EXPECT_MESSAGE_HAS(c, "model.safetensors");
}

TEST(SafetensorsValidate, HeaderTooBig) {
  std::vector<std::byte> b(16, std::byte{0});
  uint64_t n = 100'000'001;
  std::memcpy(b.data(), &n, 8);
  auto c = parse_error(b);
  EXPECT_MESSAGE_HAS(c, "model.safetensors: header length 100000001 exceeds");
  n = UINT64_MAX;
  std::memcpy(b.data(), &n, 8);
  c = parse_error(b);
  EXPECT_MESSAGE_HAS(c, "exceeds");
}

TEST(SafetensorsValidate, HeaderBeyondFile) {
  auto b = image("{}");
  uint64_t n = 64;
  std::memcpy(b.data(), &n, 8);
  auto c = parse_error(b);
  EXPECT_MESSAGE_HAS(c, "model.safetensors: truncated: header length 64 runs past the end of the file (10 bytes)");
}

TEST(SafetensorsValidate, TruncatedData) {
  auto c = parse_error(image(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "12345678"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: truncated: header says 16 bytes of tensor data");
  EXPECT_MESSAGE_HAS(c, "'w'");
  EXPECT_MESSAGE_HAS(c, "file has 8");
}

TEST(SafetensorsValidate, TrailingData) {
  auto c = parse_error(image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "12345678"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: file has 8 bytes of tensor data but the header accounts for only 4");
}

TEST(SafetensorsValidate, InvalidUtf8) {
  auto c = parse_error(image(std::string("{\"w\xff\":{}}")));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: header is not valid UTF-8 (at header byte 3)");
}

TEST(SafetensorsValidate, BadJson) {
  auto c = parse_error(image(R"({"w":{"dtype":"F32",)"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: header is not valid JSON");
  c = parse_error(image(R"({} {})"));
  EXPECT_MESSAGE_HAS(c, "not valid JSON");
  c = parse_error(image(std::string(5000, '[') + std::string(5000, ']')));
  EXPECT_MESSAGE_HAS(c, "model.safetensors");
}

TEST(SafetensorsValidate, NotAnObject) {
  auto c = parse_error(image(R"([1,2,3])"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: header is not a JSON object");
  c = parse_error(image(R"({"w":[1]})"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: tensor 'w': header entry is not an object");
}

TEST(SafetensorsValidate, BadMetadata) {
  auto c = parse_error(image(R"({"__metadata__":{"format":1}})"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: '__metadata__' value for 'format' must be a string");
  c = parse_error(image(R"({"__metadata__":[]})"));
  EXPECT_MESSAGE_HAS(c, "'__metadata__' must be an object");
}

TEST(SafetensorsValidate, BadDType) {
  auto c = parse_error(image(R"({"model.embed_tokens.weight":{"dtype":"F12","shape":[1],"data_offsets":[0,1]}})", "x"));
  EXPECT_EQ(c.kind, ErrorKind::kInvalidInput);
  EXPECT_MESSAGE_HAS(c, "model.safetensors: tensor 'model.embed_tokens.weight': unknown dtype 'F12'");
  EXPECT_MESSAGE_HAS(c, "F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16, I8, U8, BOOL");
  c = parse_error(image(R"({"w":{"dtype":"U32","shape":[1],"data_offsets":[0,4]}})", "xxxx"));
  EXPECT_EQ(c.kind, ErrorKind::kUnsupported);
  EXPECT_MESSAGE_HAS(c, "unsupported dtype 'U32'");
  c = parse_error(image(R"({"w":{"dtype":3,"shape":[1],"data_offsets":[0,4]}})", "xxxx"));
  EXPECT_MESSAGE_HAS(c, "tensor 'w': 'dtype' must be a string");
}

TEST(SafetensorsValidate, BadShape) {
  auto c = parse_error(image(R"({"w":{"dtype":"U8","shape":[2,-1],"data_offsets":[0,0]}})"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: tensor 'w': 'shape' must be an array of non-negative integers, got [2,-1]");
  c = parse_error(image(R"({"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,0]}})"));
  EXPECT_MESSAGE_HAS(c, "tensor 'w': 'shape'");
  c = parse_error(image(R"({"w":{"dtype":"U8","shape":3,"data_offsets":[0,0]}})"));
  EXPECT_MESSAGE_HAS(c, "tensor 'w': 'shape'");
  c = parse_error(image(R"({"w":{"dtype":"U8","shape":[99999999999999999999],"data_offsets":[0,0]}})"));
  EXPECT_MESSAGE_HAS(c, "tensor 'w'");
}

TEST(SafetensorsValidate, MissingAndUnknownKeys) {
  auto c = parse_error(image(R"({"w":{"dtype":"U8","shape":[1]}})"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: tensor 'w': missing 'data_offsets'");
  c = parse_error(image(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}})", "x"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: tensor 'w': unknown key 'extra'");
  c = parse_error(image(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", "x"));
  EXPECT_MESSAGE_HAS(c, "tensor 'w': 'data_offsets' must be [begin, end]");
  c = parse_error(image(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", "x"));
  EXPECT_MESSAGE_HAS(c, "tensor 'w': 'data_offsets'");
}

TEST(SafetensorsValidate, OverlappingOffsets) {
  auto c = parse_error(image(
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
      "123456"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: tensor 'b': data_offsets [2, 6] overlap tensor 'a', which ends at 4");
  // The same region claimed twice.
  c = parse_error(image(
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
      "1234"));
  EXPECT_MESSAGE_HAS(c, "overlap");
}

TEST(SafetensorsValidate, GapInOffsets) {
  auto c = parse_error(image(
      R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})",
      "123456"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: tensor 'b': data_offsets [4, 6] leave a gap: the previous tensor 'a' ends at 2");
  c = parse_error(image(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", "123"));
  EXPECT_MESSAGE_HAS(c, "tensor 'a': data_offsets [1, 3] leave a gap: tensor data starts at 0");
  c = parse_error(image(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[3,1]}})", "123"));
  EXPECT_MESSAGE_HAS(c, "tensor 'a': data_offsets [3, 1] end before they begin");
}

TEST(SafetensorsValidate, WrongSize) {
  auto c = parse_error(image(
      R"({"model.layers.0.mlp.up_proj.weight":{"dtype":"BF16","shape":[1024,3072],"data_offsets":[0,6291454]}})",
      std::string(6291454, 'x')));
  EXPECT_MESSAGE_HAS(c,
                     "model.safetensors: tensor 'model.layers.0.mlp.up_proj.weight': shape [1024, 3072] × BF16 "
                     "needs 6291456 bytes but data_offsets span 6291454");
}

TEST(SafetensorsValidate, SizeOverflow) {
  auto c = parse_error(image(
      R"({"w":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", "12345678"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: tensor 'w': shape [4294967296, 4294967296, 16] × F64 overflows");
}

TEST(SafetensorsValidate, DuplicateName) {
  auto c = parse_error(image(
      R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
      "12"));
  EXPECT_MESSAGE_HAS(c, "model.safetensors: header: duplicate tensor name 'w'");
  c = parse_error(image(R"({"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "1"));
  EXPECT_MESSAGE_HAS(c, "duplicate key 'dtype'");
}

TEST(SafetensorsValidate, OpenNamesPath) {
  TempDir dir;
  fs::path p = dir.path() / "broken.safetensors";
  auto bytes = image(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "1234");
  write_file_atomic(p, bytes.data(), bytes.size());
  auto c = catch_error([&] { SafetensorsFile::open(p); });
  EXPECT_MESSAGE_HAS(c, p.string() + ": truncated");
  c = catch_error([&] { SafetensorsFile::open(dir.path() / "nope.safetensors"); });
  EXPECT_EQ(c.kind, ErrorKind::kNotFound);
  EXPECT_MESSAGE_HAS(c, "nope.safetensors");
}

// Cutting a valid file at every length must throw, never crash.
TEST(SafetensorsValidate, EveryTruncationOfAValidFileIsAnError) {
  std::string raw = read_file(testing::test_data("io/hf_layout.safetensors"));
  auto bytes = to_bytes(raw);
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::span<const std::byte> cut(bytes.data(), n);
    EXPECT_THROW(SafetensorsFile::parse(cut, "cut"), Error) << n;
  }
  EXPECT_NO_THROW(SafetensorsFile::parse(bytes, "full"));
}

}  // namespace
}  // namespace hipformers
