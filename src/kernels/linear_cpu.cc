#include <cblas.h>

#include <algorithm>

#include "backend.h"

namespace hipformers::kernels::cpu {

void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y) {
  const int64_t out_features = weight.size(0);
  const int64_t in_features = weight.size(1);
  const int64_t rows = x.numel() / in_features;
  float* out = y.mutable_data<float>();
  // y[rows, out] = x[rows, in] * W[out, in]^T
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(out_features),
              static_cast<int>(in_features), 1.0f, x.data<float>(), static_cast<int>(in_features),
              weight.data<float>(), static_cast<int>(in_features), 0.0f, out, static_cast<int>(out_features));
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  if (!b && dtype == DType::kF32) return;
#pragma omp parallel for if (rows > 1)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_features; ++o) {
      float& v = out[r * out_features + o];
      v = round_to_dtype(b ? v + b[o] : v, dtype);
    }
}

// The reference of the fused projection: the unfused ops one after another.
void fused_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, const LinearFusion& fusion,
                  Tensor& y) {
  const int64_t in_f = weight.size(1);
  const int64_t rows = x.numel() / in_f;
  Tensor input = x;
  if (fusion.norm_weight) {
    input = Tensor::empty(Shape{rows, in_f}, DType::kF32);
    Tensor source = x;
    rms_norm(nullptr, source, *fusion.norm_weight, fusion.eps, dtype, input, nullptr);
  }
  if (fusion.swiglu_output) {
    Tensor gate_up = Tensor::empty(Shape{rows, weight.size(0)}, DType::kF32);
    linear(input, weight, bias, dtype, gate_up);
    silu_and_mul_packed(gate_up, dtype, y);
  } else {
    linear(input, weight, bias, dtype, y);
  }
  if (fusion.residual) {
    float* res = fusion.residual->mutable_data<float>();
    const float* out = y.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i) res[i] = round_to_dtype(out[i] + res[i], dtype);
  }
}

void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, Tensor& dx, Tensor& dweight,
                     Tensor& dbias) {
  const int out_f = static_cast<int>(weight.size(0));
  const int in_f = static_cast<int>(weight.size(1));
  const int rows = static_cast<int>(x.numel() / in_f);
  // dx[rows, in] = dy[rows, out] * W[out, in]
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, in_f, out_f, 1.0f, dy.data<float>(), out_f,
              weight.data<float>(), in_f, 0.0f, dx.mutable_data<float>(), in_f);
  // dW[out, in] += dy^T[out, rows] * x[rows, in]
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_f, in_f, rows, 1.0f, dy.data<float>(), out_f,
              x.data<float>(), in_f, 1.0f, dweight.mutable_data<float>(), in_f);
  if (dbias.defined()) {
    float* db = dbias.mutable_data<float>();
    const float* g = dy.data<float>();
    for (int r = 0; r < rows; ++r)
      for (int o = 0; o < out_f; ++o) db[o] += g[static_cast<int64_t>(r) * out_f + o];
  }
}

}  // namespace hipformers::kernels::cpu
