// Linear layer y = x W^T + b (torch.nn.Linear), through cblas_sgemm.
// Weights are held as F32 on the CPU whatever the checkpoint dtype: a
// bf16/f16 weight converts to f32 exactly, once at load, so every matmul is
// one sgemm with no per-call conversion (2x the memory of bf16, the price of
// a simple, fast reference; GPU kernels will read bf16 directly). With a
// bf16/f16 `dtype`, y is rounded once after the fp32 accumulation and bias
// add, as torch's CPU addmm does for bf16 tensors.
// Backward: dx = dy W;  dW += dy^T x;  db += sum_rows(dy).
#pragma once

#include "hipformers/core/tensor.h"

namespace hipformers::kernels {

// x [rows, in], weight [out, in], bias [out] or undefined, y [rows, out].
void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y);
// A linear with its neighbours folded in, for the small-batch decode path
// (the batched step runs one kernel per projection instead of norm + GEMM +
// add + activation):
//   input:  x as given; or rms_norm(x) * norm_weight (norm_weight set, x
//           [rows, in], rounded as rms_norm stores it);
//   output: y = input W^T + b; or, with swiglu_output, W = [gate; up] of
//           2 * out rows (and b of 2 * out) and y [rows, out] =
//           silu(g) * u of the rounded projections g | u (as
//           silu_and_mul_packed on the unfused output); then, with
//           `residual`, residual = round(y + residual) (the residual update
//           of add_rms_norm).
struct LinearFusion {
  const Tensor* norm_weight = nullptr;
  double eps = 0;
  bool swiglu_output = false;
  Tensor* residual = nullptr;
};
// Whether fused_linear runs these arguments as one kernel on their device
// (GPU: up to 8 rows whose normalised input fits in shared memory; the CPU
// composes the unfused ops, any size). Callers fall back to the unfused ops.
bool fused_linear_supported(const Tensor& x, const Tensor& weight, const LinearFusion& fusion);
void fused_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, const LinearFusion& fusion,
                  Tensor& y);

// dx [rows, in] is overwritten; dweight, dbias (if defined) accumulate.
void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, Tensor& dx, Tensor& dweight,
                     Tensor& dbias);

}  // namespace hipformers::kernels
