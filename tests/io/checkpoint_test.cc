#include "hipformers/io/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "hipformers/core/error.h"
#include "test_util.h"
#include "hipformers/core/file.h"
#include "hipformers/core/json.h"

namespace hipformers {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::TempDir;



// Six F32 tensors of 100 floats (400 bytes) each, with distinct contents.
struct Model {
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> tensors;
  Model() {
    const char* names[] = {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                           "model.layers.0.mlp.up_proj.weight", "model.layers.1.self_attn.q_proj.weight",
                           "model.norm.weight", "lm_head.weight"};
    data.resize(6);
    for (int i = 0; i < 6; ++i) {
      data[i].resize(100);
      for (int j = 0; j < 100; ++j) data[i][j] = static_cast<float>(i * 1000 + j);
      tensors.push_back({names[i], DType::kF32, {10, 10}, data[i].data(), 400});
    }
  }
};

void expect_same(const Checkpoint& ck, const Model& m) {
  ASSERT_EQ(ck.size(), m.tensors.size());
  for (const auto& t : m.tensors) {
    const TensorView& v = ck.tensor(t.name);
    EXPECT_EQ(v.shape, t.shape);
    ASSERT_EQ(v.nbytes, t.nbytes);
    EXPECT_EQ(std::memcmp(v.data, t.data, v.nbytes), 0) << t.name;
  }
  EXPECT_EQ(ck.total_bytes(), 2400u);
}

TEST(Checkpoint, SingleFile) {
  TempDir dir;
  Model m;
  save_checkpoint(dir.path(), m.tensors, 1'000'000);
  EXPECT_TRUE(fs::exists(dir.path() / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors.index.json"));
  Checkpoint ck = Checkpoint::open(dir.path());
  expect_same(ck, m);
  EXPECT_EQ(ck.files().size(), 1u);
  EXPECT_EQ(ck.metadata().at("format"), "pt");
  std::vector<std::string> names = ck.names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  // Opening the file directly works too.
  expect_same(Checkpoint::open(dir.path() / "model.safetensors"), m);
}

TEST(Checkpoint, ShardedRoundTrip) {
  TempDir dir;
  Model m;
  // 1000-byte shards hold two 400-byte tensors each -> 3 shards.
  save_checkpoint(dir.path(), m.tensors, 1000);
  for (const char* f : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                        "model-00003-of-00003.safetensors", "model.safetensors.index.json"})
    EXPECT_TRUE(fs::exists(dir.path() / f)) << f;
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors"));

  Json index = read_json_file(dir.path() / "model.safetensors.index.json");
  EXPECT_EQ(index["metadata"]["total_size"], 2400);
  EXPECT_EQ(index["weight_map"]["model.embed_tokens.weight"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["lm_head.weight"], "model-00003-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"].size(), 6u);

  Checkpoint ck = Checkpoint::open(dir.path());
  expect_same(ck, m);
  EXPECT_EQ(ck.files().size(), 3u);
  EXPECT_EQ(ck.metadata().at("total_size"), "2400");

  // A copy keeps views valid after the original is gone.
  const TensorView* v = nullptr;
  {
    Checkpoint copy = Checkpoint::open(dir.path());
    Checkpoint moved = std::move(copy);
    ck = moved;
    v = ck.find("model.norm.weight");
  }
  ASSERT_NE(v, nullptr);
  float first = 0;
  std::memcpy(&first, v->data, 4);
  EXPECT_EQ(first, 4000.0f);

  auto [kind, msg] = error_of([&] { ck.tensor("model.layers.9.mlp.down_proj.weight"); });
  EXPECT_EQ(kind, ErrorKind::kNotFound);
  EXPECT_NE(msg.find("'model.layers.9.mlp.down_proj.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.path().string()), std::string::npos) << msg;
  EXPECT_EQ(ck.find("nope"), nullptr);
}

TEST(Checkpoint, OversizedTensorGetsItsOwnShard) {
  TempDir dir;
  Model m;
  save_checkpoint(dir.path(), m.tensors, 300);  // every tensor exceeds the limit
  EXPECT_TRUE(fs::exists(dir.path() / "model-00006-of-00006.safetensors"));
  expect_same(Checkpoint::open(dir.path()), m);
}

TEST(Checkpoint, ResavingRemovesStaleLayouts) {
  TempDir dir;
  Model m;
  save_checkpoint(dir.path(), m.tensors, 1000);
  save_checkpoint(dir.path(), m.tensors, 0);  // now a single file
  EXPECT_TRUE(fs::exists(dir.path() / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir.path() / "model-00001-of-00003.safetensors"));
  save_checkpoint(dir.path(), m.tensors, 1300);  // 2 shards of 3
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir.path() / "model-00002-of-00002.safetensors"));
  expect_same(Checkpoint::open(dir.path()), m);
}

TEST(Checkpoint, SaveRejectsDuplicatesAcrossShards) {
  TempDir dir;
  Model m;
  m.tensors.push_back(m.tensors[0]);
  auto [kind, msg] = error_of([&] { save_checkpoint(dir.path(), m.tensors, 1000); });
  EXPECT_NE(msg.find("'model.embed_tokens.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("duplicate"), std::string::npos) << msg;
}

TEST(Checkpoint, MissingShard) {
  TempDir dir;
  Model m;
  save_checkpoint(dir.path(), m.tensors, 1000);
  fs::remove(dir.path() / "model-00002-of-00003.safetensors");
  auto [kind, msg] = error_of([&] { Checkpoint::open(dir.path()); });
  EXPECT_EQ(kind, ErrorKind::kNotFound);
  EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shard 'model-00002-of-00003.safetensors'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is missing"), std::string::npos) << msg;
}

TEST(Checkpoint, MappedTensorAbsentFromShard) {
  TempDir dir;
  Model m;
  save_checkpoint(dir.path(), m.tensors, 1000);
  fs::path index_path = dir.path() / "model.safetensors.index.json";
  Json index = read_json_file(index_path);
  index["weight_map"]["model.ghost.weight"] = "model-00001-of-00003.safetensors";
  std::string text = index.dump();
  write_file_atomic(index_path, text.data(), text.size());
  auto [kind, msg] = error_of([&] { Checkpoint::open(dir.path()); });
  EXPECT_NE(msg.find("tensor 'model.ghost.weight' is mapped to shard 'model-00001-of-00003.safetensors', "
                     "which does not contain it"),
            std::string::npos)
      << msg;

  // Mapped to the wrong shard: the message says where it really is.
  index = read_json_file(index_path);
  index["weight_map"].erase("model.ghost.weight");
  index["weight_map"]["lm_head.weight"] = "model-00001-of-00003.safetensors";
  text = index.dump();
  write_file_atomic(index_path, text.data(), text.size());
  std::tie(kind, msg) = error_of([&] { Checkpoint::open(dir.path()); });
  EXPECT_NE(msg.find("(it is in model-00003-of-00003.safetensors)"), std::string::npos) << msg;
}

TEST(Checkpoint, SameNameInTwoShards) {
  TempDir dir;
  float a[2] = {1, 2}, b[2] = {3, 4};
  std::vector<TensorToWrite> s1 = {{"w", DType::kF32, {2}, a, 8}};
  std::vector<TensorToWrite> s2 = {{"w", DType::kF32, {2}, b, 8}, {"v", DType::kF32, {2}, b, 8}};
  save_safetensors(dir.path() / "a.safetensors", s1);
  save_safetensors(dir.path() / "b.safetensors", s2);
  std::string text = R"({"metadata":{},"weight_map":{"w":"a.safetensors","v":"b.safetensors"}})";
  write_file_atomic(dir.path() / "model.safetensors.index.json", text.data(), text.size());
  auto [kind, msg] = error_of([&] { Checkpoint::open(dir.path()); });
  EXPECT_NE(msg.find("tensor 'w' is stored in two shards"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("b.safetensors"), std::string::npos) << msg;
}

TEST(Checkpoint, BadIndex) {
  TempDir dir;
  fs::path index_path = dir.path() / "model.safetensors.index.json";
  auto put = [&](const std::string& text) { write_file_atomic(index_path, text.data(), text.size()); };
  put(R"({"metadata":{}})");
  EXPECT_NE(error_of([&] { Checkpoint::open(dir.path()); }).second.find("missing 'weight_map'"),
            std::string::npos);
  put(R"({"weight_map":{"w":7}})");
  EXPECT_NE(error_of([&] { Checkpoint::open(dir.path()); }).second.find("entry for tensor 'w'"),
            std::string::npos);
  put(R"({"weight_map":{"w":"../outside.safetensors"}})");
  EXPECT_NE(error_of([&] { Checkpoint::open(dir.path()); }).second.find("not a file name inside"),
            std::string::npos);
  put(R"({"weight_map":)");
  EXPECT_NE(error_of([&] { Checkpoint::open(dir.path()); }).second.find("invalid JSON"), std::string::npos);
}

TEST(Checkpoint, NoWeights) {
  TempDir dir;
  auto [kind, msg] = error_of([&] { Checkpoint::open(dir.path()); });
  EXPECT_EQ(kind, ErrorKind::kNotFound);
  EXPECT_NE(msg.find("no model.safetensors or model.safetensors.index.json"), std::string::npos) << msg;
  std::tie(kind, msg) = error_of([&] { Checkpoint::open(dir.path() / "absent"); });
  EXPECT_EQ(kind, ErrorKind::kNotFound);
}

}  // namespace
}  // namespace hipformers
