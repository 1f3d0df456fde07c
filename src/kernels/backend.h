// The per-device implementations behind include/hipformers/kernels/*.h.
// ops.cc validates arguments once and dispatches on the tensors' device:
// cpu:: here (the <op>_cpu.cc files); a GPU build adds gpu:: with the same
// signatures from <op>_gpu.cu files beside them.
#pragma once

#include "hipformers/kernels/activation.h"
#include "hipformers/kernels/attention.h"
#include "hipformers/kernels/embedding.h"
#include "hipformers/kernels/linear.h"
#include "hipformers/kernels/rms_norm.h"
#include "hipformers/kernels/rotary.h"

namespace hipformers::kernels::cpu {

void embedding(const Tensor& weight, std::span<const int32_t> ids, Tensor& out);
void embedding_backward(const Tensor& dout, std::span<const int32_t> ids, Tensor& dweight);
void rms_norm(const Tensor* add, Tensor& x, const Tensor& weight, double eps, DType dtype, Tensor& out, Tensor* rstd);
void rms_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                       Tensor& dweight);
void apply_rope(Tensor& x, int64_t heads, std::span<const int64_t> positions, const RopeFrequencies& freqs,
                DType dtype, bool inverse);
void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y);
void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, Tensor& dx, Tensor& dweight,
                     Tensor& dbias);
void silu_and_mul(const Tensor& gate, const Tensor& up, DType dtype, Tensor& out);
void silu_and_mul_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup);
void kv_cache_append(KVCacheView& cache, const Tensor& k, const Tensor& v);
void attention(const Tensor& q, std::span<const int64_t> positions, const KVCacheView& cache,
               const AttentionSpec& spec, Tensor& out, Tensor* probs);

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
void silu_and_mul(const Tensor& gate, const Tensor& up, DType dtype, Tensor& out);
void kv_cache_append(KVCacheView& cache, const Tensor& k, const Tensor& v);
void attention(const Tensor& q, std::span<const int64_t> positions, const KVCacheView& cache,
               const AttentionSpec& spec, Tensor& out, Tensor* probs);
// The portable tiled GEMM that linear() uses on HIP and as the fallback;
// exposed so the tests check it on CUDA too.
void tiled_linear_for_test(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y);
// Largest head_dim the fused attention kernel holds in registers.
constexpr int64_t kMaxAttentionHeadDim = 256;

}  // namespace hipformers::kernels::gpu
#endif
