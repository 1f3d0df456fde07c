// RMSNorm as Llama/Qwen define it, per row of length H:
//   rstd = 1 / sqrt(mean(x^2) + eps);  y = w * (x * rstd)
// computed in fp32. With a bf16/f16 `dtype`, the normalised x is rounded to
// the dtype before the weight multiply and y after it, which is exactly where
// torch rounds when the module runs in that dtype (x.to(input_dtype), then w * x).
// Backward (xhat = x * rstd, g = dy * w):
//   dx = rstd * (g - xhat * mean(g * xhat));  dw += sum_rows(dy * xhat)
#pragma once

#include "hipformers/core/tensor.h"

namespace hipformers::kernels {

// x, out: [rows, H] (any leading shape flattened), weight [H]. `rstd`, when
// given, receives [rows] for backward. out may alias x.
void rms_norm(const Tensor& x, const Tensor& weight, double eps, DType dtype, Tensor& out, Tensor* rstd = nullptr);
// Fused residual add: residual = round(x + residual); out = rms_norm(residual).
void add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& weight, double eps, DType dtype, Tensor& out,
                  Tensor* rstd = nullptr);
// dx = d(out)/dx applied to dout; dweight accumulates (+=).
void rms_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                       Tensor& dweight);

}  // namespace hipformers::kernels
