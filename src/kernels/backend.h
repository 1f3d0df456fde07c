// The per-device implementations behind include/hipformers/kernels/*.h.
// ops.cc validates arguments once and dispatches on the tensors' device:
// cpu:: here (the <op>_cpu.cc files); a GPU build adds gpu:: with the same
// signatures from <op>_gpu.cu files beside them.
#pragma once

#include "hipformers/kernels/activation.h"
#include "hipformers/kernels/attention.h"
#include "hipformers/kernels/embedding.h"
#include "hipformers/kernels/linear.h"
#include "hipformers/kernels/logits.h"
#include "hipformers/kernels/paged_attention.h"
#include "hipformers/kernels/qkv_rope.h"
#include "hipformers/kernels/rms_norm.h"
#include "hipformers/kernels/rotary.h"

namespace hipformers::kernels {
// Error(kUnsupported) "<op> has no kernel for <device> yet" (ops.cc).
[[noreturn]] void no_gpu_kernel(const char* op, const Device& device);
// qkv_rope_write's argument checks (ops.cc); returns the common device.
Device check_qkv_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor& inv_freq,
                            const PagedBatch& batch, int64_t heads, int64_t kv_heads, const PagedKVLayer& cache,
                            const Tensor& q_out);
}  // namespace hipformers::kernels

// HF_ON_GPU(op, device, call): runs the GPU kernel on a GPU build; a CPU-only
// build never has GPU tensors (no allocator), but says so plainly if one appears.
#if defined(HIPFORMERS_WITH_CUDA) || defined(HIPFORMERS_WITH_HIP)
#define HF_GPU_KERNELS 1
#define HF_ON_GPU(op, device, call) (call)
#else
#define HF_ON_GPU(op, device, call) no_gpu_kernel(op, device)
#endif

namespace hipformers::kernels::cpu {

void embedding(const Tensor& weight, std::span<const int32_t> ids, Tensor& out);
void embedding_backward(const Tensor& dout, std::span<const int32_t> ids, Tensor& dweight);
void rms_norm(const Tensor* add, Tensor& x, const Tensor& weight, double eps, DType dtype, Tensor& out, Tensor* rstd);
void rms_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                       Tensor& dweight);
void apply_rope(Tensor& x, int64_t heads, std::span<const int64_t> positions, const RopeFrequencies& freqs,
                DType dtype, bool inverse);
void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y);
void fused_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, const LinearFusion& fusion,
                  Tensor& y);
void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, Tensor& dx, Tensor& dweight,
                     Tensor& dbias);
void silu_and_mul(const Tensor& gate, const Tensor& up, DType dtype, Tensor& out);
void silu_and_mul_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup);
void kv_cache_append(KVCacheView& cache, const Tensor& k, const Tensor& v);
void attention(const Tensor& q, std::span<const int64_t> positions, const KVCacheView& cache,
               const AttentionSpec& spec, Tensor& out, Tensor* probs);
void paged_attention(const Tensor& q, const PagedBatch& batch, const PagedKVLayer& cache, const AttentionSpec& spec,
                     Tensor& out);

// Fused decode ops (qkv_rope_cpu.cc, activation_cpu.cc, embedding_cpu.cc, logits_cpu.cc).
void qkv_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, double eps,
                    const Tensor& inv_freq, float attention_scaling, const PagedBatch& batch, int64_t heads,
                    int64_t kv_heads, DType dtype, PagedKVLayer& cache, Tensor& q_out);
void silu_and_mul_packed(const Tensor& gate_up, DType dtype, Tensor& out);
void embedding(const Tensor& weight, const Tensor& ids, Tensor& out);
void argmax_rows(const Tensor& logits, Tensor& ids);

}  // namespace hipformers::kernels::cpu

#if defined(HIPFORMERS_WITH_CUDA) || defined(HIPFORMERS_WITH_HIP)
// The GPU kernels (<op>_gpu.cu): the same contracts as cpu::, for tensors on
// one GPU in F32, BF16 or F16 storage (every tensor of a call in the same
// dtype, except rstd and probs, which are F32), accumulating in fp32.
// `dtype` rounding is applied at the same points as the CPU code; the host
// spans (ids, positions) are copied to the device by the kernel wrappers.
namespace hipformers::kernels::gpu {

void embedding(const Tensor& weight, std::span<const int32_t> ids, Tensor& out);
void rms_norm(const Tensor* add, Tensor& x, const Tensor& weight, double eps, DType dtype, Tensor& out, Tensor* rstd);
void apply_rope(Tensor& x, int64_t heads, std::span<const int64_t> positions, const RopeFrequencies& freqs,
                DType dtype, bool inverse);
void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y);
bool fused_linear_supported(const Tensor& x, const Tensor& weight, const LinearFusion& fusion);
void fused_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, const LinearFusion& fusion,
                  Tensor& y);
void silu_and_mul(const Tensor& gate, const Tensor& up, DType dtype, Tensor& out);
void kv_cache_append(KVCacheView& cache, const Tensor& k, const Tensor& v);
void attention(const Tensor& q, std::span<const int64_t> positions, const KVCacheView& cache,
               const AttentionSpec& spec, Tensor& out, Tensor* probs);
// Paged attention (paged_attention_gpu.cu): split-K decode or flash prefill.
void paged_attention(const Tensor& q, const PagedBatch& batch, const PagedKVLayer& cache, const AttentionSpec& spec,
                     Tensor& out, Tensor* scratch);
int64_t paged_attention_scratch_elems(const PagedBatch& batch, const AttentionSpec& spec);
int64_t paged_attention_shared_scratch_elems(int64_t max_seqs, int64_t max_seq_len, const AttentionSpec& spec);
// The portable tiled GEMM that linear() uses on HIP and as the fallback;
// exposed so the tests check it on CUDA too.
void tiled_linear_for_test(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y);
// Largest head_dim the fused attention kernel holds in registers.
constexpr int64_t kMaxAttentionHeadDim = 256;

// Fused decode ops (qkv_rope_gpu.cu, activation_gpu.cu, embedding_gpu.cu,
// logits_gpu.cu): enqueue work only, no allocation, copy or sync.
void qkv_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, double eps,
                    const Tensor& inv_freq, float attention_scaling, const PagedBatch& batch, int64_t heads,
                    int64_t kv_heads, DType dtype, PagedKVLayer& cache, Tensor& q_out);
// qkv_rope_write + paged_attention in one decode kernel (paged_decode_gpu.cu),
// for the decode batches, storage dtypes and head dims it is built for.
bool qkv_rope_attention_fusable(const PagedBatch& batch, DType storage, int64_t head_dim);
void qkv_rope_paged_attention_decode(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, double eps,
                                     const Tensor& inv_freq, float attention_scaling, const PagedBatch& batch,
                                     const AttentionSpec& spec, PagedKVLayer& cache, Tensor& out, Tensor* scratch);
void silu_and_mul_packed(const Tensor& gate_up, DType dtype, Tensor& out);
void embedding(const Tensor& weight, const Tensor& ids, Tensor& out);
void argmax_rows(const Tensor& logits, Tensor& ids);
// linear() takes the GEMV kernel for rows <= kGemvMaxRows (linear_gpu.cu).
constexpr int64_t kGemvMaxRows = 8;

}  // namespace hipformers::kernels::gpu
#endif
