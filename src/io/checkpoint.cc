#include "hipformers/io/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <regex>
#include <set>
#include <system_error>

#include "hipformers/core/error.h"
#include "hipformers/core/file.h"
#include "hipformers/core/json.h"

namespace hipformers {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSingleName = "model.safetensors";
constexpr const char* kIndexName = "model.safetensors.index.json";

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A shard name from an index must stay inside the checkpoint directory.
void check_shard_name(const fs::path& index, const std::string& tensor, const std::string& shard) {
  fs::path p(shard);
  bool bad = shard.empty() || p.is_absolute();
  for (const auto& part : p)
    if (part == "..") bad = true;
  if (bad)
    throw_invalid(index.string() + ": tensor '" + tensor + "' is mapped to shard '" + shard +
                  "', which is not a file name inside the checkpoint directory");
}

}  // namespace

Checkpoint Checkpoint::open(const fs::path& path) {
  Checkpoint ck;
  ck.path_ = path;
  ck.files_ = std::make_shared<std::vector<SafetensorsFile>>();
  std::vector<SafetensorsFile>& files = *ck.files_;

  fs::path single;
  fs::path index_path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (is_regular(path / kSingleName)) single = path / kSingleName;
    else if (is_regular(path / kIndexName)) index_path = path / kIndexName;
    else
      throw_error(ErrorKind::kNotFound, path.string() + ": no " + kSingleName + " or " + kIndexName +
                                            " in the model directory");
  } else if (ends_with(path.filename().string(), ".index.json")) {
    index_path = path;
  } else if (fs::exists(path, ec)) {
    single = path;
  } else {
    throw_error(ErrorKind::kNotFound, path.string() + ": no such file or directory");
  }

  if (!single.empty()) {
    files.push_back(SafetensorsFile::open(single));
    for (const TensorView& t : files.back().tensors()) ck.index_.emplace(t.name, &t);
    ck.metadata_ = files.back().metadata();
    return ck;
  }

  const std::string where = index_path.string();
  Json index = read_json_file(index_path);
  if (!index.is_object()) throw_invalid(where + ": not a JSON object");
  if (auto it = index.find("metadata"); it != index.end() && !it->is_null()) {
    if (!it->is_object()) throw_invalid(where + ": 'metadata' must be an object");
    for (auto m = it->begin(); m != it->end(); ++m)
      ck.metadata_[m.key()] = m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
  }
  auto wm = index.find("weight_map");
  if (wm == index.end()) throw_invalid(where + ": missing 'weight_map'");
  if (!wm->is_object()) throw_invalid(where + ": 'weight_map' must be an object of tensor name -> shard file");

  // Open every distinct shard once.
  const fs::path dir = index_path.parent_path();
  std::map<std::string, std::size_t> shard_index;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string())
      throw_invalid(where + ": 'weight_map' entry for tensor '" + it.key() + "' must be a file name, got " +
                    it.value().dump());
    const std::string& shard = it.value().get_ref<const std::string&>();
    if (shard_index.count(shard)) continue;
    check_shard_name(index_path, it.key(), shard);
    fs::path shard_path = dir / shard;
    if (!is_regular(shard_path))
      throw_error(ErrorKind::kNotFound, where + ": shard '" + shard + "' (holding tensor '" + it.key() +
                                            "') is missing: " + shard_path.string());
    shard_index.emplace(shard, files.size());
    files.push_back(SafetensorsFile::open(shard_path));
  }

  // Every tensor of every shard, once.
  std::unordered_map<std::string, std::size_t> owner;
  for (std::size_t f = 0; f < files.size(); ++f) {
    for (const TensorView& t : files[f].tensors()) {
      auto [it, inserted] = owner.emplace(t.name, f);
      if (!inserted)
        throw_invalid(where + ": tensor '" + t.name + "' is stored in two shards: " +
                      files[it->second].path().filename().string() + " and " +
                      files[f].path().filename().string());
      ck.index_.emplace(t.name, &t);
    }
  }
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    const std::string& shard = it.value().get_ref<const std::string&>();
    std::size_t f = shard_index.at(shard);
    if (files[f].find(it.key()) == nullptr) {
      auto o = owner.find(it.key());
      throw_invalid(where + ": tensor '" + it.key() + "' is mapped to shard '" + shard +
                    "', which does not contain it" +
                    (o == owner.end() ? std::string()
                                      : " (it is in " + files[o->second].path().filename().string() + ")"));
    }
  }
  return ck;
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const TensorView& Checkpoint::tensor(const std::string& name) const {
  if (const TensorView* t = find(name)) return *t;
  throw_error(ErrorKind::kNotFound, path_.string() + ": no tensor named '" + name + "' in the checkpoint");
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, view] : index_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t Checkpoint::total_bytes() const {
  std::size_t total = 0;
  for (const auto& [name, view] : index_) total += view->nbytes;
  return total;
}

void save_checkpoint(const fs::path& dir, std::span<const TensorToWrite> tensors, std::size_t max_shard_bytes,
                     const std::map<std::string, std::string>& metadata) {
  // Names must be unique across shards (save_safetensors checks the rest).
  std::set<std::string_view> seen;
  for (const TensorToWrite& t : tensors)
    if (!seen.insert(t.name).second)
      throw_invalid(dir.string() + ": tensor '" + t.name + "': duplicate tensor name");

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_error(ErrorKind::kRuntime, dir.string() + ": cannot create directory: " + ec.message());

  std::size_t total = 0;
  for (const TensorToWrite& t : tensors) total += t.nbytes;
  const std::size_t limit = max_shard_bytes == 0 ? std::numeric_limits<std::size_t>::max() : max_shard_bytes;

  // Split in the given order, as huggingface_hub does: a tensor bigger than the
  // limit gets a shard of its own; otherwise a shard is closed when the next
  // tensor would overflow it.
  std::vector<std::vector<TensorToWrite>> shards;
  std::vector<TensorToWrite> current;
  std::size_t current_bytes = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.nbytes > limit) {
      shards.push_back({t});
      continue;
    }
    if (!current.empty() && current_bytes + t.nbytes > limit) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(t);
    current_bytes += t.nbytes;
  }
  if (!current.empty() || shards.empty()) shards.push_back(std::move(current));

  std::set<std::string> written;
  if (shards.size() == 1) {
    save_safetensors(dir / kSingleName, shards[0], metadata);
    written.insert(kSingleName);
  } else {
    Json weight_map = Json::object();
    char name[64];
    for (std::size_t i = 0; i < shards.size(); ++i) {
      std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      save_safetensors(dir / name, shards[i], metadata);
      written.insert(name);
      for (const TensorToWrite& t : shards[i]) weight_map[t.name] = name;
    }
    Json index = {{"metadata", {{"total_size", total}}}, {"weight_map", std::move(weight_map)}};
    std::string text = index.dump(2) + "\n";
    write_file_atomic(dir / kIndexName, text.data(), text.size());
    written.insert(kIndexName);
  }

  // Remove weights of the other layout and stale shards so open() cannot pick them.
  static const std::regex shard_re(R"(model-\d{5}-of-\d{5}\.safetensors)");
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string fname = entry.path().filename().string();
    if (written.count(fname)) continue;
    if (fname == kSingleName || fname == kIndexName || std::regex_match(fname, shard_re))
      stale.push_back(entry.path());
  }
  for (const fs::path& p : stale) fs::remove(p, ec);
}

}  // namespace hipformers
