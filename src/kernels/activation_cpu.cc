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
