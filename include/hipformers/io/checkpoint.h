// A model's weights as Hugging Face stores them: one model.safetensors, or shards
// listed by model.safetensors.index.json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "hipformers/io/safetensors.h"

namespace hipformers {

class Checkpoint {
 public:
  // `path` is a model directory or a single .safetensors file. In a directory,
  // model.safetensors is preferred (as Transformers does), else
  // model.safetensors.index.json: {"metadata": {...}, "weight_map": {name: shard}}.
  // Every shard is opened (mapped) once. Errors: no weights (kNotFound), a shard
  // listed in the index is missing (kNotFound), a mapped tensor is absent from
  // its shard, or two shards hold the same tensor name (kInvalidInput).
  static Checkpoint open(const std::filesystem::path& path);

  // Error(kNotFound) "<checkpoint>: no tensor named '<name>'" if absent.
  const TensorView& tensor(const std::string& name) const;
  const TensorView* find(const std::string& name) const;
  // Sorted tensor names.
  std::vector<std::string> names() const;
  std::size_t size() const { return index_.size(); }
  // Sum of all tensors' nbytes.
  std::size_t total_bytes() const;
  // The directory (or file) given to open().
  const std::filesystem::path& path() const { return path_; }
  // The opened files, in the order of first appearance in the index.
  const std::vector<SafetensorsFile>& files() const { return *files_; }
  // The "metadata" object of the index (strings and numbers as their JSON text),
  // or the single file's __metadata__.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  Checkpoint() = default;
  std::filesystem::path path_;
  // Behind a shared_ptr so moving/copying the Checkpoint keeps views valid.
  std::shared_ptr<std::vector<SafetensorsFile>> files_;
  std::unordered_map<std::string, const TensorView*> index_;
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` into directory `dir` (created if needed) like Transformers'
// save_pretrained: a single model.safetensors if everything fits in
// `max_shard_bytes` (0 = no limit), else model-00001-of-0000N.safetensors shards
// (tensors kept in the given order; a tensor larger than the limit gets a shard
// of its own) plus model.safetensors.index.json with "metadata": {"total_size"}
// and a sorted "weight_map". Every file carries `metadata` (default
// {"format": "pt"}, which Transformers requires). Weights files of the other
// layout or stale shards left in `dir` are removed after the new ones are in place.
void save_checkpoint(const std::filesystem::path& dir, std::span<const TensorToWrite> tensors,
                     std::size_t max_shard_bytes = 5'000'000'000,
                     const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace hipformers
