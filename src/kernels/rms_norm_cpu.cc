#include <cmath>
#include <vector>

#include "backend.h"

namespace hipformers::kernels::cpu {

void rms_norm(const Tensor* add, Tensor& x, const Tensor& weight, double eps, DType dtype, Tensor& out,
              Tensor* rstd) {
  const int64_t H = weight.size(0);
  const int64_t rows = x.numel() / H;
  const float* w = weight.data<float>();
  const float* a = add ? add->data<float>() : nullptr;
  // x is only written in the fused form (it is the residual stream then).
  float* xr = add ? x.mutable_data<float>() : nullptr;
  const float* xin = add ? xr : x.data<float>();
  float* y = out.mutable_data<float>();
  float* r = rstd ? rstd->mutable_data<float>() : nullptr;
#pragma omp parallel for if (rows > 4)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t base = row * H;
    if (a)
      for (int64_t i = 0; i < H; ++i) xr[base + i] = round_to_dtype(a[base + i] + xr[base + i], dtype);
    double sum = 0;  // fp64 sum: the mean of squares is the one place a long row loses bits
    for (int64_t i = 0; i < H; ++i) sum += static_cast<double>(xin[base + i]) * xin[base + i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(H) + eps));
    if (r) r[row] = inv;
    for (int64_t i = 0; i < H; ++i)
      y[base + i] = round_to_dtype(w[i] * round_to_dtype(xin[base + i] * inv, dtype), dtype);
  }
}

void rms_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                       Tensor& dweight) {
  const int64_t H = weight.size(0);
  const int64_t rows = x.numel() / H;
  const float* dy = dout.data<float>();
  const float* xs = x.data<float>();
  const float* w = weight.data<float>();
  const float* r = rstd.data<float>();
  float* g = dx.mutable_data<float>();
  float* dw = dweight.mutable_data<float>();
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t base = row * H;
    double dot = 0;  // mean(dy * w * xhat)
    for (int64_t i = 0; i < H; ++i) dot += static_cast<double>(dy[base + i]) * w[i] * xs[base + i] * r[row];
    const double mean = dot / static_cast<double>(H);
    for (int64_t i = 0; i < H; ++i) {
      const double xhat = static_cast<double>(xs[base + i]) * r[row];
      g[base + i] = static_cast<float>(r[row] * (dy[base + i] * w[i] - xhat * mean));
      dw[i] += static_cast<float>(dy[base + i] * xhat);
    }
  }
}

}  // namespace hipformers::kernels::cpu
