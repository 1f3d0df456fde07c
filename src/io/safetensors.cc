#include "hipformers/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>

#include "hipformers/core/error.h"
#include "hipformers/core/file.h"
#include "hipformers/core/json.h"
#include "hipformers/core/utf8.h"

namespace hipformers {
namespace {

constexpr std::size_t kHeaderLengthBytes = 8;
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // as Hugging Face safetensors
constexpr int kMaxJsonDepth = 16;                       // a valid header nests 3 deep

constexpr std::array<DType, 12> kAllDTypes = {
    DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF8E5M2,
    DType::kI64, DType::kI32, DType::kI16, DType::kI8,   DType::kU8,     DType::kBool,
};

// Types Hugging Face safetensors knows but hipformers does not handle.
constexpr std::array<std::string_view, 10> kForeignDTypes = {
    "U16", "U32", "U64", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
};

std::string known_dtype_list() {
  std::string out;
  for (DType d : kAllDTypes) {
    if (!out.empty()) out += ", ";
    out += dtype_name(d);
  }
  return out;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// numel * element size with overflow detection; false on overflow.
bool checked_nbytes(const std::vector<int64_t>& shape, DType dtype, std::size_t* out) {
  std::size_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    auto ud = static_cast<std::size_t>(d);
    if (ud != 0 && n > std::numeric_limits<std::size_t>::max() / ud) return false;
    n *= ud;
  }
  std::size_t size = dtype_size(dtype);
  if (n > std::numeric_limits<std::size_t>::max() / size) return false;
  *out = n * size;
  return true;
}

std::uint64_t read_u64_le(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(p[i]);
  return v;
}

// Parses the header JSON, rejecting duplicate keys in any object and absurd
// nesting (nlohmann silently keeps the last duplicate).
Json parse_header_json(std::string_view text, const std::string& file) {
  std::vector<std::set<std::string>> keys;
  Json::parser_callback_t cb = [&](int depth, Json::parse_event_t event, Json& parsed) -> bool {
    if (depth > kMaxJsonDepth) throw_invalid(file + ": header JSON is nested too deeply");
    switch (event) {
      case Json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case Json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!keys.empty() && !keys.back().insert(key).second) {
          if (keys.size() == 1)
            throw_invalid(file + ": header: duplicate tensor name '" + key + "'");
          throw_invalid(file + ": header: duplicate key '" + key + "'");
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true);
  } catch (const nlohmann::json::exception& e) {
    std::string msg = e.what();
    if (auto p = msg.find("] "); p != std::string::npos) msg = msg.substr(p + 2);
    throw_invalid(file + ": header is not valid JSON: " + msg);
  }
}

struct Entry {
  TensorView view;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

Entry parse_entry(const std::string& file, const std::string& name, const Json& value) {
  const std::string where = file + ": tensor '" + name + "'";
  if (!value.is_object()) throw_invalid(where + ": header entry is not an object");
  const Json* dtype = nullptr;
  const Json* shape = nullptr;
  const Json* offsets = nullptr;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (it.key() == "dtype") dtype = &it.value();
    else if (it.key() == "shape") shape = &it.value();
    else if (it.key() == "data_offsets") offsets = &it.value();
    else throw_invalid(where + ": unknown key '" + it.key() + "' (expected dtype, shape, data_offsets)");
  }
  if (!dtype) throw_invalid(where + ": missing 'dtype'");
  if (!shape) throw_invalid(where + ": missing 'shape'");
  if (!offsets) throw_invalid(where + ": missing 'data_offsets'");

  Entry e;
  e.view.name = name;
  if (!dtype->is_string()) throw_invalid(where + ": 'dtype' must be a string, got " + dtype->dump());
  const std::string& dname = dtype->get_ref<const std::string&>();
  auto parsed = parse_dtype(dname);
  if (!parsed) {
    bool foreign = std::find(kForeignDTypes.begin(), kForeignDTypes.end(), dname) != kForeignDTypes.end();
    throw_error(foreign ? ErrorKind::kUnsupported : ErrorKind::kInvalidInput,
                where + ": " + (foreign ? "unsupported" : "unknown") + " dtype '" + dname +
                    "'; supported: " + known_dtype_list());
  }
  e.view.dtype = *parsed;

  if (!shape->is_array())
    throw_invalid(where + ": 'shape' must be an array of non-negative integers, got " + shape->dump());
  e.view.shape.reserve(shape->size());
  for (const Json& d : *shape) {
    if (!d.is_number_unsigned())
      throw_invalid(where + ": 'shape' must be an array of non-negative integers, got " + shape->dump());
    auto v = d.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<int64_t>::max()))
      throw_invalid(where + ": shape dimension " + std::to_string(v) + " is too large");
    e.view.shape.push_back(static_cast<int64_t>(v));
  }

  if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned())
    throw_invalid(where + ": 'data_offsets' must be [begin, end] with non-negative integers, got " +
                  offsets->dump());
  e.begin = (*offsets)[0].get<std::uint64_t>();
  e.end = (*offsets)[1].get<std::uint64_t>();
  return e;
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile SafetensorsFile::parse(std::span<const std::byte> bytes, std::string name) {
  const std::string& file = name;
  if (bytes.size() < kHeaderLengthBytes)
    throw_invalid(file + ": not a safetensors file: " + std::to_string(bytes.size()) +
                  " bytes, too small for the 8-byte header length");
  const std::uint64_t header_len = read_u64_le(bytes.data());
  if (header_len > kMaxHeaderBytes)
    throw_invalid(file + ": header length " + std::to_string(header_len) + " exceeds the limit of " +
                  std::to_string(kMaxHeaderBytes) + " bytes (corrupt or not a safetensors file)");
  const std::size_t available = bytes.size() - kHeaderLengthBytes;
  if (header_len > available)
    throw_invalid(file + ": truncated: header length " + std::to_string(header_len) +
                  " runs past the end of the file (" + std::to_string(bytes.size()) + " bytes)");

  std::string_view header(reinterpret_cast<const char*>(bytes.data() + kHeaderLengthBytes),
                          static_cast<std::size_t>(header_len));
  std::size_t bad = 0;
  if (!utf8::is_valid(header, &bad))
    throw_invalid(file + ": header is not valid UTF-8 (at header byte " + std::to_string(bad) + ")");
  Json json = parse_header_json(header, file);
  if (!json.is_object()) throw_invalid(file + ": header is not a JSON object");

  SafetensorsFile out;
  out.path_ = name;
  std::vector<Entry> entries;
  entries.reserve(json.size());
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() == "__metadata__") {
      const Json& meta = it.value();
      if (meta.is_null()) continue;
      if (!meta.is_object()) throw_invalid(file + ": '__metadata__' must be an object of strings");
      for (auto m = meta.begin(); m != meta.end(); ++m) {
        if (!m.value().is_string())
          throw_invalid(file + ": '__metadata__' value for '" + m.key() + "' must be a string, got " +
                        m.value().dump());
        out.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(file, it.key(), it.value()));
  }

  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.view.name < b.view.name;
  });

  const std::size_t data_size = available - static_cast<std::size_t>(header_len);
  const std::byte* data = bytes.data() + kHeaderLengthBytes + header_len;
  std::uint64_t cursor = 0;
  const std::string* previous = nullptr;
  for (Entry& e : entries) {
    const std::string where = file + ": tensor '" + e.view.name + "'";
    const std::string span = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.end < e.begin) throw_invalid(where + ": data_offsets " + span + " end before they begin");
    if (e.begin > cursor) {
      throw_invalid(where + ": data_offsets " + span + " leave a gap: " +
                    (previous ? "the previous tensor '" + *previous + "' ends at "
                              : std::string("tensor data starts at ")) +
                    std::to_string(cursor));
    }
    if (e.begin < cursor) {
      throw_invalid(where + ": data_offsets " + span + " overlap tensor '" + *previous +
                    "', which ends at " + std::to_string(cursor));
    }
    std::size_t need = 0;
    if (!checked_nbytes(e.view.shape, e.view.dtype, &need))
      throw_invalid(where + ": shape " + shape_string(e.view.shape) + " × " + dtype_name(e.view.dtype) +
                    " overflows the addressable size");
    const std::uint64_t have = e.end - e.begin;
    if (have != need)
      throw_invalid(where + ": shape " + shape_string(e.view.shape) + " × " + dtype_name(e.view.dtype) +
                    " needs " + std::to_string(need) + " bytes but data_offsets span " +
                    std::to_string(have));
    cursor = e.end;
    previous = &e.view.name;
  }
  if (cursor > data_size)
    throw_invalid(file + ": truncated: header says " + std::to_string(cursor) +
                  " bytes of tensor data (tensor '" + *previous + "' ends there), file has " +
                  std::to_string(data_size));
  if (cursor < data_size)
    throw_invalid(file + ": file has " + std::to_string(data_size) +
                  " bytes of tensor data but the header accounts for only " + std::to_string(cursor) +
                  " (trailing bytes)");

  out.data_bytes_ = data_size;
  out.tensors_.reserve(entries.size());
  for (Entry& e : entries) {
    e.view.data = data + e.begin;
    e.view.nbytes = static_cast<std::size_t>(e.end - e.begin);
    out.index_.emplace(e.view.name, out.tensors_.size());
    out.tensors_.push_back(std::move(e.view));
  }
  return out;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  std::shared_ptr<const MappedFile> mapped = MappedFile::open(path);
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(mapped->data()), mapped->size());
  SafetensorsFile out = parse(bytes, path.string());
  out.path_ = path;
  out.keep_alive_ = std::move(mapped);
  return out;
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorView& SafetensorsFile::tensor(const std::string& name) const {
  if (const TensorView* t = find(name)) return *t;
  throw_error(ErrorKind::kNotFound, path_.string() + ": no tensor named '" + name + "'");
}

// ---- Writing ------------------------------------------------------------------

namespace {

[[noreturn]] void throw_write_error(const std::filesystem::path& path, const char* what, int err) {
  ErrorKind kind = (err == ENOENT || err == ENOTDIR) ? ErrorKind::kNotFound : ErrorKind::kRuntime;
  throw_error(kind, path.string() + ": " + what + ": " + std::strerror(err));
}

// A temporary file beside the target, removed unless committed.
class AtomicWriter {
 public:
  explicit AtomicWriter(const std::filesystem::path& path) : path_(path) {
    static std::atomic<unsigned> counter{0};
    tmp_ = path;
    tmp_ += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) throw_write_error(path_, "cannot create temporary file", errno);
  }
  ~AtomicWriter() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;

  void write(const void* data, std::size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      std::size_t chunk = std::min<std::size_t>(size, std::size_t{1} << 30);
      ssize_t n = ::write(fd_, p, chunk);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw_write_error(path_, "cannot write", errno);
      }
      p += n;
      size -= static_cast<std::size_t>(n);
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) throw_write_error(path_, "cannot flush", errno);
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw_write_error(path_, "cannot flush", errno);
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
      throw_write_error(path_, "cannot rename temporary file into place", errno);
    committed_ = true;
    // Make the rename durable; failure here does not lose data already written.
    std::filesystem::path dir = path_.parent_path();
    if (dir.empty()) dir = ".";
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::filesystem::path path_;
  std::filesystem::path tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Layout order of the Hugging Face writer: descending by its Dtype enum, which
// groups types by element size (so every tensor is aligned to its element
// size), then by name. Matching it makes our files byte-identical to HF's.
int write_rank(DType d) {
  switch (d) {
    case DType::kBool: return 0;
    case DType::kU8: return 1;
    case DType::kI8: return 2;
    case DType::kF8E5M2: return 3;
    case DType::kF8E4M3: return 4;
    case DType::kI16: return 5;
    case DType::kF16: return 6;
    case DType::kBF16: return 7;
    case DType::kI32: return 8;
    case DType::kF32: return 9;
    case DType::kF64: return 10;
    case DType::kI64: return 11;
  }
  return 0;
}

}  // namespace

void save_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string file = path.string();
  std::set<std::string_view> names;
  for (const TensorToWrite& t : tensors) {
    const std::string where = file + ": tensor '" + t.name + "'";
    if (!utf8::is_valid(t.name)) throw_invalid(file + ": tensor name is not valid UTF-8");
    if (t.name == "__metadata__") throw_invalid(where + ": the name is reserved for the header metadata");
    if (!names.insert(t.name).second) throw_invalid(where + ": duplicate tensor name");
    for (int64_t d : t.shape)
      if (d < 0) throw_invalid(where + ": negative dimension in shape " + shape_string(t.shape));
    std::size_t need = 0;
    if (!checked_nbytes(t.shape, t.dtype, &need))
      throw_invalid(where + ": shape " + shape_string(t.shape) + " × " + dtype_name(t.dtype) +
                    " overflows the addressable size");
    if (need != t.nbytes)
      throw_invalid(where + ": shape " + shape_string(t.shape) + " × " + dtype_name(t.dtype) + " needs " +
                    std::to_string(need) + " bytes but " + std::to_string(t.nbytes) + " were given");
    if (t.nbytes > 0 && t.data == nullptr) throw_invalid(where + ": data is null");
  }
  for (const auto& [key, value] : metadata) {
    if (!utf8::is_valid(key) || !utf8::is_valid(value))
      throw_invalid(file + ": metadata entry is not valid UTF-8");
  }

  std::vector<const TensorToWrite*> order;
  order.reserve(tensors.size());
  for (const TensorToWrite& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    int ra = write_rank(a->dtype), rb = write_rank(b->dtype);
    if (ra != rb) return ra > rb;
    return a->name < b->name;
  });

  std::string header = "{";
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header += "\"__metadata__\":" + meta.dump();
  }
  std::size_t offset = 0;
  for (const TensorToWrite* t : order) {
    if (header.size() > 1) header += ',';
    header += Json(t->name).dump();
    header += ":{\"dtype\":\"";
    header += dtype_name(t->dtype);
    header += "\",\"shape\":[";
    for (std::size_t i = 0; i < t->shape.size(); ++i) {
      if (i) header += ',';
      header += std::to_string(t->shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t->nbytes) + "]}";
    offset += t->nbytes;
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxHeaderBytes)
    throw_invalid(file + ": header of " + std::to_string(header.size()) + " bytes exceeds the " +
                  std::to_string(kMaxHeaderBytes) + "-byte limit readers enforce");

  unsigned char len[8];
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));

  AtomicWriter out(path);
  out.write(len, sizeof(len));
  out.write(header.data(), header.size());
  for (const TensorToWrite* t : order)
    if (t->nbytes > 0) out.write(t->data, t->nbytes);
  out.commit();
}

}  // namespace hipformers
