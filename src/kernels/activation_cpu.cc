#include <cmath>

#include "backend.h"

namespace hipformers::kernels::cpu {

void silu_and_mul(const Tensor& gate, const Tensor& up, DType dtype, Tensor& out) {
  const int64_t n = gate.numel();
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* y = out.mutable_data<float>();
#pragma omp parallel for if (n > 4096)
  for (int64_t i = 0; i < n; ++i) {
    const float silu = g[i] / (1.0f + std::exp(-g[i]));
    y[i] = round_to_dtype(round_to_dtype(silu, dtype) * u[i], dtype);
  }
}

void silu_and_mul_packed(const Tensor& gate_up, DType dtype, Tensor& out) {
  const int64_t I = out.size(-1);
  const int64_t rows = I == 0 ? 0 : out.numel() / I;
  const float* gu = gate_up.data<float>();
  float* y = out.mutable_data<float>();
#pragma omp parallel for if (rows * I > 4096)
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gu + r * 2 * I;
    const float* u = g + I;
    for (int64_t i = 0; i < I; ++i) {
      const float silu = g[i] / (1.0f + std::exp(-g[i]));
      y[r * I + i] = round_to_dtype(round_to_dtype(silu, dtype) * u[i], dtype);
    }
  }
}

void silu_and_mul_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup) {
  const int64_t n = gate.numel();
  const float* dy = dout.data<float>();
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* dg = dgate.mutable_data<float>();
  float* du = dup.mutable_data<float>();
#pragma omp parallel for if (n > 4096)
  for (int64_t i = 0; i < n; ++i) {
    const float sig = 1.0f / (1.0f + std::exp(-g[i]));
    dg[i] = dy[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
    du[i] = dy[i] * g[i] * sig;
  }
}

}  // namespace hipformers::kernels::cpu
