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
#include "sdpa_row_cpu.h"

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
        sdpa_row(
            qv, D, first, pos, spec.scale, dt, [&](int64_t j) { return row(kp, b, g, j); },
            [&](int64_t j) { return row(vp, b, g, j); }, acc, ys + (t * H + h) * D);
      }
  }
}

}  // namespace hipformers::kernels::cpu
