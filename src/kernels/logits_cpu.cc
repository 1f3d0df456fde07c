// Host-only helpers on logits rows: generation works on one row per step, on
// the host even when the model runs on a GPU (the row is copied back).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backend.h"
#include "hipformers/core/error.h"
#include "hipformers/kernels/logits.h"

namespace hipformers::kernels {

void softmax(std::span<const float> logits, std::span<float> out) {
  if (out.size() != logits.size()) throw_invalid("softmax: output size differs from input size");
  if (logits.empty()) return;
  float max = -std::numeric_limits<float>::infinity();
  for (float v : logits) max = std::max(max, v);
  if (max == -std::numeric_limits<float>::infinity()) throw_invalid("softmax: every logit is -inf");
  double sum = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    float e = std::exp(logits[i] - max);
    out[i] = e;
    sum += e;
  }
  for (float& v : out) v = static_cast<float>(v / sum);
}

int64_t argmax(std::span<const float> values) {
  if (values.empty()) throw_invalid("argmax of an empty row");
  std::size_t best = 0;
  for (std::size_t i = 1; i < values.size(); ++i)
    if (values[i] > values[best] || (std::isnan(values[i]) && !std::isnan(values[best]))) best = i;
  return static_cast<int64_t>(best);
}

std::vector<int64_t> top_k(std::span<const float> values, int64_t k) {
  if (k < 0) throw_invalid("top_k: k must not be negative");
  const auto n = static_cast<int64_t>(values.size());
  k = std::min(k, n);
  std::vector<int64_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  auto before = [&](int64_t a, int64_t b) {
    const float va = values[static_cast<std::size_t>(a)], vb = values[static_cast<std::size_t>(b)];
    return va > vb || (va == vb && a < b);
  };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
  idx.resize(static_cast<std::size_t>(k));
  return idx;
}

namespace cpu {

void argmax_rows(const Tensor& logits, Tensor& ids) {
  const int64_t B = logits.size(0), V = logits.size(1);
  const float* x = logits.data<float>();
  int32_t* out = ids.mutable_data<int32_t>();
  for (int64_t b = 0; b < B; ++b)
    out[b] = static_cast<int32_t>(argmax(std::span<const float>(x + b * V, static_cast<std::size_t>(V))));
}

}  // namespace cpu
}  // namespace hipformers::kernels
