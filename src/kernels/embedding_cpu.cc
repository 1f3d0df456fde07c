#include <cstring>

#include "backend.h"

namespace hipformers::kernels::cpu {

void embedding(const Tensor& weight, std::span<const int32_t> ids, Tensor& out) {
  const int64_t hidden = weight.size(1);
  const float* w = weight.data<float>();
  float* y = out.mutable_data<float>();
  const auto n = static_cast<int64_t>(ids.size());
#pragma omp parallel for if (n > 16)
  for (int64_t t = 0; t < n; ++t)
    std::memcpy(y + t * hidden, w + static_cast<int64_t>(ids[static_cast<std::size_t>(t)]) * hidden,
                static_cast<std::size_t>(hidden) * sizeof(float));
}

void embedding(const Tensor& weight, const Tensor& ids, Tensor& out) {
  // ops.cc has checked every id.
  embedding(weight, std::span<const int32_t>(ids.data<int32_t>(), static_cast<std::size_t>(ids.numel())), out);
}

void embedding_backward(const Tensor& dout, std::span<const int32_t> ids, Tensor& dweight) {
  // Serial over tokens: the same id may repeat, so rows would race.
  const int64_t hidden = dweight.size(1);
  const float* dy = dout.data<float>();
  float* dw = dweight.mutable_data<float>();
  for (std::size_t t = 0; t < ids.size(); ++t) {
    float* row = dw + static_cast<int64_t>(ids[t]) * hidden;
    const float* g = dy + static_cast<int64_t>(t) * hidden;
    for (int64_t i = 0; i < hidden; ++i) row[i] += g[i];
  }
}

}  // namespace hipformers::kernels::cpu
