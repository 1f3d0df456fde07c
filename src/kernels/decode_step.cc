// The persistent decode step's host side (decode_step.h): which models and
// steps it takes, and the dispatch to the CUDA sm_90 kernel
// (decode_step_sm90_gpu.cu). Builds without that kernel (CPU, HIP) report
// it unsupported, and the caller runs the per-kernel step.
#include "hipformers/kernels/decode_step.h"

#include <cstdint>
#include <cstdlib>
#include <string>


namespace hipformers::kernels {

#if defined(HIPFORMERS_WITH_CUDA)
namespace gpu {
// decode_step_sm90_gpu.cu
int64_t decode_step_scratch_elems(int64_t n_layers, int64_t kv_heads, int64_t heads, int64_t head_dim,
                                  int64_t max_seq_len);
bool decode_step_device_ok(int device, std::string* why);
int decode_step_max_layers();
int decode_step_max_input();
int decode_step_whole_head_keys();
void decode_step_launch(const DecodeStepArgs& args);
}  // namespace gpu
#endif

PersistentDecode persistent_decode_mode() {
  const char* v = std::getenv("HIPFORMERS_PERSISTENT_DECODE");
  const std::string s = v ? v : "";
  if (s == "0") return PersistentDecode::kOff;
  if (s == "1") return PersistentDecode::kAuto;
  if (s == "require") return PersistentDecode::kRequire;
  return PersistentDecode::kShort;
}

int64_t decode_step_whole_head_keys(const Device& device) {
#if defined(HIPFORMERS_WITH_CUDA)
  if (device.is_gpu()) return gpu::decode_step_whole_head_keys();
#endif
  (void)device;
  return 0;
}

int64_t decode_step_scratch_elems(int64_t n_layers, int64_t kv_heads, int64_t heads, int64_t head_dim,
                                  int64_t max_seq_len, const Device& device) {
#if defined(HIPFORMERS_WITH_CUDA)
  if (device.is_gpu()) return gpu::decode_step_scratch_elems(n_layers, kv_heads, heads, head_dim, max_seq_len);
#endif
  (void)n_layers, (void)kv_heads, (void)heads, (void)head_dim, (void)max_seq_len, (void)device;
  return 0;
}

namespace {

bool fail(std::string* why, const std::string& reason) {
  if (why) *why = reason;
  return false;
}

}  // namespace

bool decode_step_supported(const DecodeStepArgs& a, DType dtype, std::string* why) {
#if !defined(HIPFORMERS_WITH_CUDA)
  (void)a, (void)dtype;
  return fail(why, "this build has no persistent decode step (CUDA sm_90 only)");
#else
  if (!a.hidden || !a.hidden->defined() || !a.hidden->device().is_gpu()) return fail(why, "not on a GPU");
  const Device device = a.hidden->device();
  if (dtype != DType::kBF16) return fail(why, "bf16 only");
  if (!a.batch || a.batch->num_seqs != 1 || a.batch->num_tokens != 1) return fail(why, "one sequence, one token only");
  if (a.layers.empty() || static_cast<int>(a.layers.size()) > gpu::decode_step_max_layers())
    return fail(why, "too many layers");
  const int64_t H = a.hidden->shape().dims().back(), D = a.head_dim;
  if (D != 64 && D != 128) return fail(why, "head_dim 64 or 128 only");
  if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0 || a.heads / a.kv_heads > 8)
    return fail(why, "at most 8 query heads per kv head");
  const int64_t I = a.act ? a.act->shape().dims().back() : 0;
  const int64_t max_in = gpu::decode_step_max_input();
  // Inputs staged whole in shared memory, split in 16-byte vectors over up
  // to 8 warps; gate|up tiles need at least two rows of H in a stage.
  for (int64_t n : {H, I, a.heads * D})
    if (n <= 0 || n % 64 != 0 || n > max_in) return fail(why, "hidden, intermediate and heads x head_dim must be multiples of 64 up to 8192");
  if (H > 4096) return fail(why, "hidden size above 4096");
  // (bulk copies read every weight and norm weight: 16-byte aligned sources)
  auto ok = [&](const Tensor* t) {
    return t && t->defined() && t->dtype() == DType::kBF16 && t->device() == device &&
           reinterpret_cast<std::uintptr_t>(t->raw_data()) % 16 == 0;
  };
  for (const DecodeStepLayer& L : a.layers) {
    if (!ok(L.input_norm) || !ok(L.qkv_proj) || !ok(L.o_proj) || !ok(L.post_attention_norm) || !ok(L.gate_up_proj) ||
        !ok(L.down_proj) || !L.cache)
      return fail(why, "a layer weight is missing or not bf16 on the device");
    const bool qn = L.q_norm && L.q_norm->defined(), kn = L.k_norm && L.k_norm->defined();
    if (qn != kn || (qn && (!ok(L.q_norm) || !ok(L.k_norm)))) return fail(why, "q_norm and k_norm go together");
    if (!ok(&L.cache->k) || !ok(&L.cache->v)) return fail(why, "the KV cache is not bf16 on the device");
  }
  if (!ok(a.embed_tokens) || !ok(a.final_norm) || !ok(a.lm_head)) return fail(why, "embedding, final norm or lm_head");
  if (!a.scratch || !a.scratch->defined() ||
      a.scratch->numel() < decode_step_scratch_elems(static_cast<int64_t>(a.layers.size()), a.kv_heads, a.heads, D,
                                                     a.batch->block_table.shape().dims().back() * kKVPageSize, device))
    return fail(why, "no scratch for it");
  return gpu::decode_step_device_ok(device.index, why);
#endif
}

bool decode_step(const DecodeStepArgs& args, std::string* why) {
  if (!decode_step_supported(args, args.hidden ? args.hidden->dtype() : DType::kF32, why)) return false;
#if defined(HIPFORMERS_WITH_CUDA)
  gpu::decode_step_launch(args);
#endif
  return true;
}

}  // namespace hipformers::kernels
