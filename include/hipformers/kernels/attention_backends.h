// Attention backends chosen at load time from the user's string (Transformers'
// attn_implementation), per device key ("cpu", "cuda", "rocm"):
//
//   eager              unfused reference; can return attention weights (every device)
//   sdpa               the default: the fused kernel (every device)
//   flash_attention_2  GPUs: the fused GPU kernel (attention_gpu.cu)
//   flash_attention_3  GPUs: the fused GPU kernels; on sm_90+ the paged prefill
//                      takes its K/V pages by TMA (paged_prefill_sm90_gpu.cu)
//   kernels-community/flash-attn      (cuda, rocm) -> flash_attention_2
//   kernels-community/flash-attn3     (cuda)       -> flash_attention_3
//   kernels-community/aiter-flash-attn (rocm)      -> flash_attention_2
//
// The kernel-repository aliases cannot be fetched (no Python, no Hub): they
// resolve to the built-in fused kernel and carry a one-line notice, logged
// once per process. Each backend names the registry's Attention kernel it runs
// (registry.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hipformers::kernels {

struct AttentionBackend {
  std::string requested;  // as the user wrote it
  std::string name;       // eager, sdpa, flash_attention_2 or flash_attention_3
  std::string device;     // device key it was resolved for
  std::string kernel;     // the registry's Attention kernel: attention_eager, attention_sdpa, attention_fused
  bool returns_weights = false;  // eager only (output_attentions)
  std::string notice;     // one line for stderr, or empty
};

// The names (canonical names, then aliases) accepted on `device`.
std::vector<std::string> attention_backends(std::string_view device);

// Error(kInvalidInput) for an unknown name or one that does not exist on
// `device`, listing attention_backends(device); unknown device key likewise.
AttentionBackend resolve_attention_backend(std::string_view requested, std::string_view device);

// Prints backend.notice on stderr ("hipformers: <notice>"), once per process
// per distinct notice; nothing when it is empty.
void log_attention_notice_once(const AttentionBackend& backend);

}  // namespace hipformers::kernels
