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
// dx [rows, in] is overwritten; dweight, dbias (if defined) accumulate.
void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, Tensor& dx, Tensor& dweight,
                     Tensor& dbias);

}  // namespace hipformers::kernels
