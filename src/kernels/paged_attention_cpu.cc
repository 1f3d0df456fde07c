// CPU reference for attention over a paged KV cache (paged_attention.h): the
// sdpa math of attention_cpu.cc (double dot products, one pass with a running
// max, p = round(exp(s - max)) accumulated in double, output rounded once),
// reading each key and value row through the sequence's block table instead
// of a contiguous cache. Same loops in the same order, so for the same keys
// it returns exactly what cpu::attention returns.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend.h"

namespace hipformers::kernels::cpu {

void paged_attention(const Tensor& q, const PagedBatch& batch, const PagedKVLayer& cache, const AttentionSpec& spec,
                     Tensor& out) {
  const int64_t H = spec.heads, D = spec.head_dim, group = spec.heads / spec.kv_heads, KV = spec.kv_heads;
  const int64_t T = batch.num_tokens;
  const DType dt = spec.dtype;
  const float* qs = q.data<float>();
  const float* kp = cache.k.data<float>();
  const float* vp = cache.v.data<float>();
  float* ys = out.mutable_data<float>();
  const int32_t* query_start = batch.query_start.data<int32_t>();
  const int32_t* seq_lens = batch.seq_lens.data<int32_t>();
  const int32_t* table = batch.block_table.data<int32_t>();
  const int64_t table_stride = batch.block_table.size(1);

  // Sequence and absolute position of every token row (the last n_b
  // positions of sequence b).
  std::vector<int64_t> seq_of(static_cast<std::size_t>(T)), pos_of(static_cast<std::size_t>(T));
  for (int64_t b = 0; b < batch.num_seqs; ++b) {
    const int64_t begin = query_start[b], end = query_start[b + 1];
    for (int64_t t = begin; t < end; ++t) {
      seq_of[static_cast<std::size_t>(t)] = b;
      pos_of[static_cast<std::size_t>(t)] = seq_lens[b] - (end - begin) + (t - begin);
    }
  }
  // Row j of kv head g in sequence b's pages.
  auto row = [&](const float* pool, int64_t b, int64_t g, int64_t j) {
    const int64_t page = table[b * table_stride + j / kKVPageSize];
    return pool + ((page * KV + g) * kKVPageSize + j % kKVPageSize) * D;
  };

#pragma omp parallel
  {
    std::vector<double> acc(static_cast<std::size_t>(D));
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t b = seq_of[static_cast<std::size_t>(t)], pos = pos_of[static_cast<std::size_t>(t)];
        const int64_t first = spec.sliding_window ? std::max<int64_t>(0, pos - *spec.sliding_window + 1) : 0;
        const int64_t g = h / group;
        const float* qv = qs + (t * H + h) * D;
        std::fill(acc.begin(), acc.end(), 0.0);
        double max = -std::numeric_limits<double>::infinity();
        double sum = 0;
        for (int64_t j = first; j <= pos; ++j) {
          const float* kr = row(kp, b, g, j);
          double dot = 0;
          for (int64_t i = 0; i < D; ++i) dot += static_cast<double>(qv[i]) * kr[i];
          const double s = static_cast<float>(dot) * static_cast<double>(spec.scale);
          if (s > max) {
            const double correction = std::exp(max - s);
            sum *= correction;
            for (double& a : acc) a *= correction;
            max = s;
          }
          const double e = std::exp(s - max);
          sum += e;
          const double p = round_to_dtype(static_cast<float>(e), dt);
          const float* vr = row(vp, b, g, j);
          for (int64_t i = 0; i < D; ++i) acc[static_cast<std::size_t>(i)] += p * vr[i];
        }
        float* y = ys + (t * H + h) * D;
        for (int64_t i = 0; i < D; ++i)
          y[i] = round_to_dtype(static_cast<float>(acc[static_cast<std::size_t>(i)] / sum), dt);
      }
  }
}

}  // namespace hipformers::kernels::cpu
