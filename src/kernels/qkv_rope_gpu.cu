// qkv_rope_write on the GPU: a block per (token, group of 4 heads), one warp per q/k head (a
// loop when there are more heads than warps), the v heads copied by the whole
// block. The norm reproduces rms_norm_kernel's reduction order for a row of
// head_dim (the same virtual thread count, per-warp sums added in warp
// order) and the rope the expressions of rope_kernel, so fused and unfused
// GPU paths agree; the normalised values are rounded to the storage type in
// between, as the unfused path stores and reloads them.
#include <algorithm>

#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/launch.h"

namespace hipformers::kernels::gpu {
namespace {

struct QkvArgs {
  const int32_t* positions;
  const int32_t* token_seq;
  const int32_t* block_table;
  const float* inv_freq;
  int64_t num_seqs, max_pages, num_pages;
  int heads, kv_heads, head_dim;
  int norm_threads;  // rms_norm's blockDim for a row of head_dim
  float eps, scaling, sign;
  int mode;
};

template <typename T>
__global__ void __launch_bounds__(1024) qkv_rope_kernel(const T* __restrict__ qkv, const T* __restrict__ q_norm,
                                                        const T* __restrict__ k_norm, T* k_pool, T* v_pool, T* q_out,
                                                        QkvArgs a) {
  allow_dependents();
  grid_dependency_wait();  // launched dependent (gpu/launch.h)
  const int64_t t = blockIdx.x;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  const int D = a.head_dim, half = D / 2, mode = a.mode;
  const int32_t p = a.positions[t], b = a.token_seq[t];
  // The cache slot; none (no k/v write) for an index out of range.
  int64_t page = -1;
  if (p >= 0 && b >= 0 && b < a.num_seqs && p / kKVPageSize < a.max_pages) {
    page = a.block_table[b * a.max_pages + p / kKVPageSize];
    if (page >= a.num_pages) page = -1;
  }
  const int64_t slot = p % kKVPageSize;
  const float pos = static_cast<float>(p);
  const T* row = qkv + t * static_cast<int64_t>(a.heads + 2 * a.kv_heads) * D;

  for (int h = static_cast<int>(blockIdx.y) * warps + warp; h < a.heads + a.kv_heads;
       h += warps * static_cast<int>(gridDim.y)) {
    const bool is_q = h < a.heads;
    T* dst = is_q ? q_out + (t * a.heads + h) * D
                  : page < 0 ? nullptr : k_pool + ((page * a.kv_heads + (h - a.heads)) * kKVPageSize + slot) * D;
    if (!dst) continue;  // warp-uniform
    const T* src = row + static_cast<int64_t>(h) * D;
    const T* w = is_q ? q_norm : k_norm;
    float inv = 0;
    if (w) {
      // rms_norm_kernel: virtual thread v sums elements v, v + n, ...; each
      // virtual warp reduces with warp_sum; block_sum adds warps in order.
      float total = 0;
      for (int vw = 0; vw * kWarp < a.norm_threads; ++vw) {
        float sum = 0;
        for (int i = vw * kWarp + lane; i < D; i += a.norm_threads) {
          const float v = load(src + i);
          sum += v * v;
        }
        total += warp_sum(sum);
      }
      inv = 1.0f / sqrtf(total / static_cast<float>(D) + a.eps);
    }
    for (int i = lane; i < half; i += kWarp) {
      float x0 = load(src + i), x1 = load(src + i + half);
      if (w) {  // rms_norm's output, then what storing it as T keeps
        x0 = round_to(round_to(load(w + i) * round_to(x0 * inv, mode), mode), Storage<T>::kMode);
        x1 = round_to(round_to(load(w + i + half) * round_to(x1 * inv, mode), mode), Storage<T>::kMode);
      }
      // rope_kernel
      const float angle = a.inv_freq[i] * pos;
      const float c = round_to(cosf(angle) * a.scaling, mode);
      const float s = a.sign * round_to(sinf(angle) * a.scaling, mode);
      const float va = x0, vb = x1;
      store(dst + i, round_to(round_to(va * c, mode) + round_to(-vb * s, mode), mode));
      store(dst + i + half, round_to(round_to(vb * c, mode) + round_to(va * s, mode), mode));
    }
  }
  if (page < 0) return;
  const int64_t kv_width = static_cast<int64_t>(a.kv_heads) * D;
  const T* v_src = row + static_cast<int64_t>(a.heads + a.kv_heads) * D;
  for (int64_t e = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < kv_width;
       e += static_cast<int64_t>(blockDim.x) * gridDim.y) {
    const int64_t h = e / D, i = e - h * D;
    v_pool[((page * a.kv_heads + h) * kKVPageSize + slot) * D + i] = v_src[e];
  }
}

}  // namespace

void qkv_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, double eps,
                    const Tensor& inv_freq, float attention_scaling, const PagedBatch& batch, int64_t heads,
                    int64_t kv_heads, DType dtype, PagedKVLayer& cache, Tensor& q_out) {
  const int64_t tokens = batch.num_tokens;
  if (tokens == 0) return;
  const int64_t D = cache.k.size(3);
  QkvArgs a{};
  a.positions = static_cast<const int32_t*>(batch.positions.raw_data());
  a.token_seq = static_cast<const int32_t*>(batch.token_seq.raw_data());
  a.block_table = static_cast<const int32_t*>(batch.block_table.raw_data());
  a.inv_freq = static_cast<const float*>(inv_freq.raw_data());
  a.num_seqs = batch.num_seqs;
  a.max_pages = batch.block_table.size(1);
  a.num_pages = cache.k.size(0);
  a.heads = static_cast<int>(heads);
  a.kv_heads = static_cast<int>(kv_heads);
  a.head_dim = static_cast<int>(D);
  a.norm_threads = D >= 1024 ? 1024 : D >= 256 ? 256 : 64;  // as rms_norm() launches
  a.eps = static_cast<float>(eps);
  a.scaling = attention_scaling;
  a.sign = 1.0f;
  a.mode = round_mode(dtype);
  // A warp per head, 4 heads (128 threads, two CDNA wavefronts) per block and
  // the heads of a token spread over blockIdx.y, so a decode step's one token
  // still fills several multiprocessors (a grid-stride loop covers the rest
  // on 64-wide wavefronts).
  const int threads = 128;
  const auto head_blocks = static_cast<unsigned>((heads + kv_heads + 3) / 4);
  gpuStream_t s = stream_for(qkv.device().index);
  dispatch_float(qkv.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_dependent(qkv_rope_kernel<T>, dim3(static_cast<unsigned>(tokens), head_blocks), dim3(threads), 0, s,
        static_cast<const T*>(qkv.raw_data()), q_norm.defined() ? static_cast<const T*>(q_norm.raw_data()) : nullptr,
        k_norm.defined() ? static_cast<const T*>(k_norm.raw_data()) : nullptr,
        static_cast<T*>(cache.k.mutable_raw_data()), static_cast<T*>(cache.v.mutable_raw_data()),
        static_cast<T*>(q_out.mutable_raw_data()), a);
  });
  check_launch("qkv_rope_write");
}

}  // namespace hipformers::kernels::gpu
