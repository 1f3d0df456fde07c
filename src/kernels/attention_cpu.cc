#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend.h"
#include "sdpa_row_cpu.h"

namespace hipformers::kernels::cpu {

void kv_cache_append(KVCacheView& cache, const Tensor& k, const Tensor& v) {
  const int64_t kv_heads = cache.k.size(0), capacity = cache.k.size(1), dim = cache.k.size(2);
  const int64_t T = k.numel() / (kv_heads * dim);
  const float* ks = k.data<float>();
  const float* vs = v.data<float>();
  float* kc = cache.k.mutable_data<float>();
  float* vc = cache.v.mutable_data<float>();
  // [T, kv_heads, dim] -> [kv_heads, capacity, dim]: each head's keys contiguous
  // so a query streams through them.
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < kv_heads; ++h) {
      const int64_t src = (t * kv_heads + h) * dim;
      const int64_t dst = (h * capacity + cache.length + t) * dim;
      std::memcpy(kc + dst, ks + src, static_cast<std::size_t>(dim) * sizeof(float));
      std::memcpy(vc + dst, vs + src, static_cast<std::size_t>(dim) * sizeof(float));
    }
  cache.length += T;
}

void attention(const Tensor& q, std::span<const int64_t> positions, const KVCacheView& cache,
               const AttentionSpec& spec, Tensor& out, Tensor* probs) {
  const int64_t H = spec.heads, D = spec.head_dim, group = spec.heads / spec.kv_heads;
  const int64_t T = static_cast<int64_t>(positions.size());
  const int64_t capacity = cache.k.size(1), S = cache.length;
  const DType dt = spec.dtype;
  const float* qs = q.data<float>();
  const float* kc = cache.k.data<float>();
  const float* vc = cache.v.data<float>();
  float* ys = out.mutable_data<float>();
  float* ps = probs ? probs->mutable_data<float>() : nullptr;
  if (ps) std::memset(ps, 0, static_cast<std::size_t>(H * T * S) * sizeof(float));

#pragma omp parallel
  {
    std::vector<float> scores(static_cast<std::size_t>(S));
    std::vector<double> acc(static_cast<std::size_t>(D));
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t pos = positions[static_cast<std::size_t>(t)];
        const int64_t first = spec.sliding_window ? std::max<int64_t>(0, pos - *spec.sliding_window + 1) : 0;
        const float* qv = qs + (t * H + h) * D;
        const float* kh = kc + (h / group) * capacity * D;
        const float* vh = vc + (h / group) * capacity * D;
        float* y = ys + (t * H + h) * D;
        if (spec.eager) {
          std::fill(acc.begin(), acc.end(), 0.0);
          // torch: (q @ k^T) rounded, * scale rounded, softmax in fp32 rounded, @ v rounded.
          float max = -std::numeric_limits<float>::infinity();
          for (int64_t j = first; j <= pos; ++j) {
            double dot = 0;
            for (int64_t i = 0; i < D; ++i) dot += static_cast<double>(qv[i]) * kh[j * D + i];
            const float s = round_to_dtype(round_to_dtype(static_cast<float>(dot), dt) * spec.scale, dt);
            scores[static_cast<std::size_t>(j)] = s;
            max = std::max(max, s);
          }
          double sum = 0;
          for (int64_t j = first; j <= pos; ++j) {
            float& s = scores[static_cast<std::size_t>(j)];
            s = std::exp(s - max);
            sum += s;
          }
          for (int64_t j = first; j <= pos; ++j) {
            const float p = round_to_dtype(static_cast<float>(scores[static_cast<std::size_t>(j)] / sum), dt);
            if (ps) ps[(h * T + t) * S + j] = p;
            for (int64_t i = 0; i < D; ++i) acc[static_cast<std::size_t>(i)] += static_cast<double>(p) * vh[j * D + i];
          }
          for (int64_t i = 0; i < D; ++i) y[i] = round_to_dtype(static_cast<float>(acc[static_cast<std::size_t>(i)]), dt);
        } else {
          sdpa_row(
              qv, D, first, pos, spec.scale, dt, [&](int64_t j) { return kh + j * D; },
              [&](int64_t j) { return vh + j * D; }, acc, y);
        }
      }
  }
}

}  // namespace hipformers::kernels::cpu
