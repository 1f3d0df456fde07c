// qkv_rope_write on the GPU: a block per (token, group of 4 heads), one warp per q/k head (a
// loop when there are more heads than warps; the math is norm_rope_head,
// gpu/qk_norm_rope.h), the v heads copied by the whole block.
#include <algorithm>

#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/launch.h"
#include "gpu/qk_norm_rope.h"

namespace hipformers::kernels::gpu {
namespace {

struct QkvArgs {
  const int32_t* positions;
  const int32_t* token_seq;
  const int32_t* block_table;
  int64_t num_seqs, max_pages, num_pages;
  int heads, kv_heads;
  QkNormRope rope;
};

template <typename T>
__global__ void __launch_bounds__(1024) qkv_rope_kernel(const T* __restrict__ qkv, const T* __restrict__ q_norm,
                                                        const T* __restrict__ k_norm, T* k_pool, T* v_pool, T* q_out,
                                                        QkvArgs a) {
  StepTraceScope trace_scope;
  allow_dependents();
  grid_dependency_wait();  // launched dependent (gpu/launch.h)
  const int64_t t = blockIdx.x;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  const int D = a.rope.head_dim;
  const int32_t p = a.positions[t], b = a.token_seq[t];
  // The cache slot; none (no k/v write) for an index out of range.
  int64_t page = -1;
  if (p >= 0 && b >= 0 && b < a.num_seqs && p / kKVPageSize < a.max_pages) {
    page = a.block_table[b * a.max_pages + p / kKVPageSize];
    if (page >= a.num_pages) page = -1;
  }
  const int64_t slot = p % kKVPageSize;
  const T* row = qkv + t * static_cast<int64_t>(a.heads + 2 * a.kv_heads) * D;

  for (int h = static_cast<int>(blockIdx.y) * warps + warp; h < a.heads + a.kv_heads;
       h += warps * static_cast<int>(gridDim.y)) {
    const bool is_q = h < a.heads;
    T* dst = is_q ? q_out + (t * a.heads + h) * D
                  : page < 0 ? nullptr : k_pool + ((page * a.kv_heads + (h - a.heads)) * kKVPageSize + slot) * D;
    if (!dst) continue;  // warp-uniform
    norm_rope_head(row + static_cast<int64_t>(h) * D, is_q ? q_norm : k_norm, a.rope, static_cast<float>(p), lane,
                   [&](int i, float v) { store(dst + i, v); });
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
  a.num_seqs = batch.num_seqs;
  a.max_pages = batch.block_table.size(1);
  a.num_pages = cache.k.size(0);
  a.heads = static_cast<int>(heads);
  a.kv_heads = static_cast<int>(kv_heads);
  a.rope = qk_norm_rope_args(inv_freq, D, eps, attention_scaling, dtype);
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
