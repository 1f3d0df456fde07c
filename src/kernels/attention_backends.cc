#include "hipformers/kernels/attention_backends.h"

#include <iostream>
#include <mutex>
#include <set>

#include "hipformers/core/error.h"
#include "hipformers/kernels/registry.h"

namespace hipformers::kernels {
namespace {

struct BackendRow {
  std::string_view name;      // what the user may write
  std::string_view canonical;  // eager, sdpa, flash_attention_2, flash_attention_3
  bool cpu, cuda, rocm;
  bool alias;                 // a kernel repository
};

constexpr BackendRow kRows[] = {
    {"eager", "eager", true, true, true, false},
    {"sdpa", "sdpa", true, true, true, false},
    {"flash_attention_2", "flash_attention_2", false, true, true, false},
    {"flash_attention_3", "flash_attention_3", false, true, true, false},
    {"kernels-community/flash-attn", "flash_attention_2", false, true, true, true},
    {"kernels-community/flash-attn3", "flash_attention_3", false, true, false, true},
    {"kernels-community/aiter-flash-attn", "flash_attention_2", false, false, true, true},
};

bool exists_on(const BackendRow& row, std::string_view device) {
  return device == "cpu" ? row.cpu : device == "cuda" ? row.cuda : row.rocm;
}

std::string kernel_for(std::string_view canonical, std::string_view device) {
  if (canonical == "eager") return "attention_eager";
  // sdpa on the CPU is its one-pass kernel; on a GPU every fused name runs
  // the fused kernels (flash_attention_3's Hopper prefill is chosen inside
  // them: AttentionSpec::hopper_kernels).
  return device == "cpu" ? "attention_sdpa" : "attention_fused";
}

}  // namespace

std::vector<std::string> attention_backends(std::string_view device) {
  check_device_key(device);
  std::vector<std::string> out;
  for (const BackendRow& row : kRows)
    if (exists_on(row, device)) out.emplace_back(row.name);
  return out;
}

AttentionBackend resolve_attention_backend(std::string_view requested, std::string_view device) {
  std::vector<std::string> available = attention_backends(device);
  std::string list;
  for (const auto& n : available) list += (list.empty() ? "" : ", ") + n;
  for (const BackendRow& row : kRows) {
    if (row.name != requested) continue;
    if (!exists_on(row, device))
      throw_invalid("attention implementation '" + std::string(requested) + "' is not available on " +
                    std::string(device) + "; available on " + std::string(device) + ": " + list);
    AttentionBackend b;
    b.requested = std::string(requested);
    b.name = std::string(row.canonical);
    b.device = std::string(device);
    b.kernel = kernel_for(row.canonical, device);
    b.returns_weights = row.canonical == "eager";
    if (row.alias)
      b.notice = "the package flash_attn seems to be not installed; " + b.requested +
                 " runs hipformers' fused attention kernel";
    return b;
  }
  throw_invalid("unknown attention implementation '" + std::string(requested) + "'; available on " +
                std::string(device) + ": " + list);
}

void log_attention_notice_once(const AttentionBackend& backend) {
  if (backend.notice.empty()) return;
  static std::mutex mutex;
  static std::set<std::string> logged;
  std::lock_guard<std::mutex> lock(mutex);
  if (logged.insert(backend.notice).second) std::cerr << "hipformers: " << backend.notice << std::endl;
}

}  // namespace hipformers::kernels
