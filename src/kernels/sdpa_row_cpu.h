// One query row of the CPU sdpa reference, shared by the contiguous-cache
// (attention_cpu.cc) and the paged (paged_attention_cpu.cc) attention so the
// two agree bit for bit: one pass over the visible keys [first, last] with a
// running max (a larger score rescales what was accumulated by
// exp(old_max - new_max)), p = round(exp(s - max)) accumulated in fp64, the
// output divided by the sum of the unrounded exponentials and rounded once.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "hipformers/core/tensor.h"

namespace hipformers::kernels::cpu {

// key(j) / value(j) return the head_dim floats of key/value position j.
// `acc` is scratch of head_dim doubles.
template <typename KeyRow, typename ValueRow>
void sdpa_row(const float* q, int64_t D, int64_t first, int64_t last, float scale, DType dt, KeyRow key,
              ValueRow value, std::vector<double>& acc, float* y) {
  std::fill(acc.begin(), acc.end(), 0.0);
  double max = -std::numeric_limits<double>::infinity();
  double sum = 0;
  for (int64_t j = first; j <= last; ++j) {
    const float* kr = key(j);
    double dot = 0;
    for (int64_t i = 0; i < D; ++i) dot += static_cast<double>(q[i]) * kr[i];
    const double s = static_cast<float>(dot) * static_cast<double>(scale);
    if (s > max) {
      const double correction = std::exp(max - s);
      sum *= correction;
      for (double& a : acc) a *= correction;
      max = s;
    }
    const double e = std::exp(s - max);
    sum += e;
    const double p = round_to_dtype(static_cast<float>(e), dt);
    const float* vr = value(j);
    for (int64_t i = 0; i < D; ++i) acc[static_cast<std::size_t>(i)] += p * vr[i];
  }
  for (int64_t i = 0; i < D; ++i) y[i] = round_to_dtype(static_cast<float>(acc[static_cast<std::size_t>(i)] / sum), dt);
}

}  // namespace hipformers::kernels::cpu
