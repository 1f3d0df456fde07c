// CPU reference of qkv_rope_write (qkv_rope.h): the very expressions of
// cpu::rms_norm (per head, fp64 sum of squares) and cpu::apply_rope, applied
// one after the other, so the fused and unfused paths agree bit for bit.
#include <cmath>
#include <cstring>
#include <vector>

#include "backend.h"

namespace hipformers::kernels::cpu {

void qkv_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, double eps,
                    const Tensor& inv_freq, float attention_scaling, const PagedBatch& batch, int64_t heads,
                    int64_t kv_heads, DType dtype, PagedKVLayer& cache, Tensor& q_out) {
  const int64_t D = cache.k.size(3), half = D / 2, T = batch.num_tokens;
  const int64_t width = (heads + 2 * kv_heads) * D;
  const int64_t max_pages = batch.block_table.size(1);
  const float* in = qkv.data<float>();
  const float* qn = q_norm.defined() ? q_norm.data<float>() : nullptr;
  const float* kn = k_norm.defined() ? k_norm.data<float>() : nullptr;
  const float* freq = inv_freq.data<float>();
  const int32_t* positions = batch.positions.data<int32_t>();
  const int32_t* token_seq = batch.token_seq.data<int32_t>();
  const int32_t* block_table = batch.block_table.data<int32_t>();
  float* k_pool = cache.k.mutable_data<float>();
  float* v_pool = cache.v.mutable_data<float>();
  float* q = q_out.mutable_data<float>();
#pragma omp parallel for if (T > 1)
  for (int64_t t = 0; t < T; ++t) {
    // cos/sin as cpu::apply_rope builds them (fp32 angle, scaled, rounded).
    std::vector<float> cos_v(static_cast<std::size_t>(half)), sin_v(static_cast<std::size_t>(half));
    const float pos = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = freq[i] * pos;
      cos_v[static_cast<std::size_t>(i)] = round_to_dtype(std::cos(angle) * attention_scaling, dtype);
      sin_v[static_cast<std::size_t>(i)] = 1.0f * round_to_dtype(std::sin(angle) * attention_scaling, dtype);
    }
    const int64_t p = positions[t];
    const int64_t page = block_table[token_seq[t] * max_pages + p / kKVPageSize];
    const int64_t slot = p % kKVPageSize;
    const float* row = in + t * width;
    std::vector<float> head(static_cast<std::size_t>(D));
    float* v = head.data();
    for (int64_t h = 0; h < heads + kv_heads; ++h) {
      const bool is_q = h < heads;
      const float* src = row + h * D;
      const float* w = is_q ? qn : kn;
      if (w) {  // cpu::rms_norm on one row of length D
        double sum = 0;
        for (int64_t i = 0; i < D; ++i) sum += static_cast<double>(src[i]) * src[i];
        const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(D) + eps));
        for (int64_t i = 0; i < D; ++i) v[i] = round_to_dtype(w[i] * round_to_dtype(src[i] * inv, dtype), dtype);
      } else {
        std::memcpy(v, src, static_cast<std::size_t>(D) * sizeof(float));
      }
      for (int64_t i = 0; i < half; ++i) {  // cpu::apply_rope on one head
        const float c = cos_v[static_cast<std::size_t>(i)], s = sin_v[static_cast<std::size_t>(i)];
        const float a = v[i], b = v[i + half];
        v[i] = round_to_dtype(round_to_dtype(a * c, dtype) + round_to_dtype(-b * s, dtype), dtype);
        v[i + half] = round_to_dtype(round_to_dtype(b * c, dtype) + round_to_dtype(a * s, dtype), dtype);
      }
      float* dst = is_q ? q + (t * heads + h) * D : k_pool + ((page * kv_heads + (h - heads)) * kKVPageSize + slot) * D;
      std::memcpy(dst, v, static_cast<std::size_t>(D) * sizeof(float));
    }
    for (int64_t h = 0; h < kv_heads; ++h)
      std::memcpy(v_pool + ((page * kv_heads + h) * kKVPageSize + slot) * D, row + (heads + kv_heads + h) * D,
                  static_cast<std::size_t>(D) * sizeof(float));
  }
}

}  // namespace hipformers::kernels::cpu
