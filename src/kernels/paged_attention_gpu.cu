// Attention over the paged KV cache (paged_attention.h) on the GPU.
//
// Decode batches (one query per sequence) run the split-K kernel of
// paged_decode_gpu.cu.
//
// Prefill (anything else: ragged batches of any query counts, causal, sliding
// window, GQA): flash-attention-2 style. A block takes a tile of queries of
// one (sequence, head) and walks the visible key tiles with an online softmax.
//   CUDA with BF16/F16 storage and head_dim 64 or 128: tensor cores through
//     mma.sync m16n8k16 (fp32 accumulate) with S and P in registers, 128
//     queries (8 warps of 16 rows) x 64 keys (one page, cp.async double
//     buffered) per step; see paged_prefill_mma_kernel.
//   Otherwise (F32, which stays fp32 with no TF32; HIP; other head dims): a
//     portable tiled SIMT kernel in fp32 with shared-memory tiles.
//
// Rounding (sdpa, like the CPU reference and attention_gpu.cu): scores in
// fp32, p = round(exp(s - running max)) to spec.dtype before the p.v product
// (accumulated in fp32), the sum over the unrounded exponentials, output
// rounded once. The running max advances per key tile here instead of per key,
// so bf16/f16 outputs can differ from the CPU in the last place.
#include <limits>
#include <mutex>
#include <type_traits>

#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/launch.h"
#include "gpu/paged_decode.h"
#include "gpu/prefill_mma.h"
#include "gpu/qk_norm_rope.h"

namespace hipformers::kernels::gpu {
namespace {

constexpr int kPrefillThreads = 128;

// ---- Prefill: portable tiled SIMT kernel --------------------------------------
// 128 threads as 8 row groups (ty) x 16 column lanes (tx): a thread holds
// kBQ/8 query rows, kBK/16 key columns of the score tile and kD/16 output
// dims per row. Tiles padded by one float per row (no bank conflicts).
constexpr int kTX = 16, kTY = kPrefillThreads / kTX;

template <typename T, int kD, int kBQ, int kBK>
__global__ void __launch_bounds__(kPrefillThreads) paged_prefill_simt_kernel(
    const T* __restrict__ q, const T* __restrict__ kpool, const T* __restrict__ vpool, T* __restrict__ out,
    const int32_t* __restrict__ query_start, const int32_t* __restrict__ seq_lens,
    const int32_t* __restrict__ block_table, int table_stride, int heads, int kv_heads, int group, int D,
    float scale, int window, int mode) {
  constexpr int kRI = kBQ / kTY, kCJ = kBK / kTX, kDJ = kD / kTX;
  static_assert(kBQ % kTY == 0 && kBK % kTX == 0 && kD % kTX == 0 && kPage % kBK == 0, "prefill tiling");
  __shared__ float s_q[kBQ][kD + 1];
  __shared__ float s_kv[kBK][kD + 1];
  __shared__ float s_p[kBQ][kBK + 1];

  const int b = blockIdx.z, h = blockIdx.y, g = h / group;
  const int tile = static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x);  // longest tiles first
  const int q_begin = query_start[b], n = query_start[b + 1] - q_begin;
  const int q0 = tile * kBQ;
  if (q0 >= n) return;
  const int nq = min(kBQ, n - q0);
  const int len = seq_lens[b];
  const int pos0 = len - n + q0, pos_last = pos0 + nq - 1;
  const int first0 = window > 0 ? max(0, pos0 - window + 1) : 0;
  const int tx = threadIdx.x % kTX, ty = threadIdx.x / kTX;
  const int64_t q_row0 = static_cast<int64_t>(q_begin) + q0;

  for (int e = threadIdx.x; e < kBQ * kD; e += kPrefillThreads) {
    const int r = e / kD, d = e % kD;
    s_q[r][d] = r < nq && d < D ? load(q + ((q_row0 + r) * heads + h) * D + d) : 0.0f;
  }
  float m[kRI], l[kRI], acc[kRI][kDJ];
#pragma unroll
  for (int i = 0; i < kRI; ++i) {
    m[i] = neg_inf();
    l[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < kDJ; ++j) acc[i][j] = 0.0f;
  }
  const int32_t* table = block_table + static_cast<int64_t>(b) * table_stride;
  // Rows [kt, kt + kBK) of one page into s_kv, zeros past the sequence's end
  // (those slots were never written).
  auto load_tile = [&](const T* pool, int kt) {
    const int64_t base = ((static_cast<int64_t>(table[kt / kPage]) * kv_heads + g) * kPage + kt % kPage) * D;
    for (int e = threadIdx.x; e < kBK * kD; e += kPrefillThreads) {
      const int c = e / kD, d = e % kD;
      s_kv[c][d] = kt + c < len && d < D ? load(pool + base + static_cast<int64_t>(c) * D + d) : 0.0f;
    }
  };

  for (int kt = first0 / kBK * kBK; kt <= pos_last; kt += kBK) {
    load_tile(kpool, kt);
    __syncthreads();
    float s[kRI][kCJ];
#pragma unroll
    for (int i = 0; i < kRI; ++i)
#pragma unroll
      for (int j = 0; j < kCJ; ++j) s[i][j] = 0.0f;
#pragma unroll 8
    for (int d = 0; d < kD; ++d) {
      float qv[kRI], kv[kCJ];
#pragma unroll
      for (int i = 0; i < kRI; ++i) qv[i] = s_q[ty + i * kTY][d];
#pragma unroll
      for (int j = 0; j < kCJ; ++j) kv[j] = s_kv[tx + j * kTX][d];
#pragma unroll
      for (int i = 0; i < kRI; ++i)
#pragma unroll
        for (int j = 0; j < kCJ; ++j) s[i][j] = fmaf(qv[i], kv[j], s[i][j]);
    }
    float p[kRI][kCJ];
#pragma unroll
    for (int i = 0; i < kRI; ++i) {
      const int r = ty + i * kTY, qp = pos0 + r;
      const int fq = window > 0 ? max(0, qp - window + 1) : 0;
      float tmax = neg_inf();
#pragma unroll
      for (int j = 0; j < kCJ; ++j) {
        const int kp = kt + tx + j * kTX;
        const bool visible = r < nq && kp <= qp && kp >= fq;
        s[i][j] = visible ? s[i][j] * scale : neg_inf();
        tmax = fmaxf(tmax, s[i][j]);
      }
      tmax = warp_max<kTX>(tmax);
      const float m_new = fmaxf(m[i], tmax);
      const bool none = m_new == neg_inf();  // nothing visible yet in this row
      const float corr = none ? 1.0f : expf(m[i] - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kCJ; ++j) {
        const float e = none || s[i][j] == neg_inf() ? 0.0f : expf(s[i][j] - m_new);
        sum += e;
        p[i][j] = round_to(e, mode);
      }
      l[i] = l[i] * corr + warp_sum<kTX>(sum);
      m[i] = m_new;
#pragma unroll
      for (int j = 0; j < kDJ; ++j) acc[i][j] *= corr;
    }
    __syncthreads();  // everyone is done with the keys
#pragma unroll
    for (int i = 0; i < kRI; ++i)
#pragma unroll
      for (int j = 0; j < kCJ; ++j) s_p[ty + i * kTY][tx + j * kTX] = p[i][j];
    load_tile(vpool, kt);
    __syncthreads();
#pragma unroll 4
    for (int c = 0; c < kBK; ++c) {
      float pv[kRI], vv[kDJ];
#pragma unroll
      for (int i = 0; i < kRI; ++i) pv[i] = s_p[ty + i * kTY][c];
#pragma unroll
      for (int j = 0; j < kDJ; ++j) vv[j] = s_kv[c][tx + j * kTX];
#pragma unroll
      for (int i = 0; i < kRI; ++i)
#pragma unroll
        for (int j = 0; j < kDJ; ++j) acc[i][j] = fmaf(pv[i], vv[j], acc[i][j]);
    }
    __syncthreads();  // s_kv and s_p are rewritten by the next tile
  }
#pragma unroll
  for (int i = 0; i < kRI; ++i) {
    const int r = ty + i * kTY;
    if (r >= nq) continue;
    T* y = out + ((q_row0 + r) * heads + h) * D;
#pragma unroll
    for (int j = 0; j < kDJ; ++j) {
      const int d = tx + j * kTX;
      if (d < D) store(y + d, round_to(acc[i][j] / l[i], mode));
    }
  }
}

#if defined(HIPFORMERS_WITH_CUDA)
// ---- Prefill: tensor cores through mma.sync (CUDA, BF16/F16, head_dim 64/128)
// FlashAttention-2 style, all in registers except the K/V pages.
//
// Tiles. A block of kMmaWarps (8) warps takes kMmaBQ = 128 queries of one
// (sequence, head); warp w owns query rows 16w .. 16w + 15. The key loop walks
// the visible pages of the sequence, one page (64 keys, the [64, head_dim]
// slice of kv head h / group) per step: K and V pages arrive through 16-byte
// cp.async (zero-filled past seq_len, so the garbage of unwritten slots never
// reaches an mma) into padded shared memory (row stride head_dim + 8
// elements: ldmatrix rows fall in distinct banks), double buffered: page j + 1
// is in flight while page j is computed.
//
// Fragments (PTX ISA, mma.m16n8k16 .bf16/.f16 with f32 accumulators; lane =
// 4 * gid + tig, gid = lane / 4, tig = lane % 4):
//   A (16x16, row): 4 b32 regs = rows {gid, gid+8} x cols {2tig, 2tig+1} and
//     the same +8 columns: r0 (gid, k 0-7), r1 (gid+8, k 0-7), r2 (gid, k 8-15),
//     r3 (gid+8, k 8-15).
//   B (16x8, col): b0 = k {2tig, 2tig+1} of column gid, b1 = the same k + 8.
//   C/D (16x8 f32): c0,c1 = row gid, cols {2tig, 2tig+1}; c2,c3 = row gid+8.
// Q (16 x head_dim per warp) is read once from global straight into A
// fragments (qa[head_dim / 16][4]) and kept for the whole key loop.
// S = Q K^T: B = K^T; a K row (one key, consecutive dims) is exactly what a
//   non-transposed ldmatrix hands to the B layout, so one ldmatrix.x4 gives
//   b0/b1 of two 8-key n-tiles for one 16-dim k-step.
// O += P V: the S accumulators of n-tiles 2k, 2k+1 (rows gid/gid+8, keys
//   16k + {2tig, 2tig+1} and +8) are, packed in pairs, the A fragment of key
//   step k (no shared memory round trip); B = V [key][dim] needs key pairs per
//   register, which ldmatrix.x4.trans gives for two 8-dim n-tiles.
//
// Math per row (a row lives in the 4 lanes of a quad; max and sum reduce with
// two xor shuffles): t = s * scale * log2(e) (scores in fp32), m' = max(m,
// max_j t_j), p_j = 2^(t_j - m') (= exp(scale s_j - max)), l = l 2^(m - m') +
// sum_j p_j (unrounded; kept per lane and reduced at the end), O = O 2^(m - m')
// + round(p) V with p rounded to the storage dtype when packed into the A
// fragment, out = round(O / l) once. The causal / sliding-window / seq_len mask
// (-inf) is applied only on tiles that need it for the warp; a row that has
// seen no visible key yet keeps m = -inf and uses 0 as its reference (no
// -inf - -inf).
template <typename T, int kD>
__global__ void __launch_bounds__(kMmaThreads, kD <= 64 ? 2 : 1) paged_prefill_mma_kernel(
    const T* __restrict__ q, const T* __restrict__ kpool, const T* __restrict__ vpool, T* __restrict__ out,
    const int32_t* __restrict__ query_start, const int32_t* __restrict__ seq_lens,
    const int32_t* __restrict__ block_table, int table_stride, int heads, int kv_heads, int group, float scale,
    int window) {
  using L = MmaLayout<kD>;
  constexpr int kRowVecs = kD / 8;  // 16-byte vectors per K/V row
  constexpr int kVecs = kPage * kRowVecs;
  static_assert(kVecs % kMmaThreads == 0, "cp.async tiling");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // cp.async and bf16 mma.sync need sm_80 or newer
#else
  extern __shared__ __align__(128) unsigned char smem[];
  T* s_kv = reinterpret_cast<T*>(smem);
  PrefillTile tile;
  // Tiles slowest in the grid, longest first.
  if (!tile.init(blockIdx.x, blockIdx.y, static_cast<int>(gridDim.z) - 1 - static_cast<int>(blockIdx.z), query_start,
                 seq_lens, group, window))
    return;
  const int tid = threadIdx.x;
  const int32_t* table = block_table + static_cast<int64_t>(tile.b) * table_stride;
  const uint32_t s_base = smem_addr(s_kv);

  // Page t of the walk -> stage t % 2 (rows past seq_len zero-filled).
  auto load_page = [&](int t) {
    const int kt = tile.kt0 + t * kPage;
    const int64_t base = (static_cast<int64_t>(table[kt / kPage]) * kv_heads + tile.g) * kPage * kD;
    const int valid = tile.len - kt;
    const uint32_t sk = s_base + static_cast<uint32_t>((t & 1) * L::kStage * 2);
    const uint32_t sv = sk + static_cast<uint32_t>(L::kTile * 2);
#pragma unroll
    for (int i = 0; i < kVecs / kMmaThreads; ++i) {
      const int e = tid + i * kMmaThreads;
      const int r = e / kRowVecs, c = e % kRowVecs;
      const bool ok = r < valid;
      const int64_t src = base + (ok ? r * kD + c * 8 : 0);
      const uint32_t dst = static_cast<uint32_t>((r * L::kLd + c * 8) * 2);
      cp_async16(sk + dst, kpool + src, ok);
      cp_async16(sv + dst, vpool + src, ok);
    }
    cp_async_commit();
  };
  load_page(0);

  MmaPrefillWarp<T, kD> w;
  w.init(q, tile, heads, scale, window, tid / 32, tid % 32);
  for (int t = 0; t < tile.ntiles; ++t) {
    if (t + 1 < tile.ntiles) {
      load_page(t + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int kt = tile.kt0 + t * kPage;
    if (w.needs(kt)) {
      const uint32_t sk = s_base + static_cast<uint32_t>((t & 1) * L::kStage * 2);
      w.attend(sk, sk + static_cast<uint32_t>(L::kTile * 2), kt);
    }
    __syncthreads();  // stage t % 2 is refilled by the next iteration's load
  }
  w.store(out, tile, heads);
#endif
}

#endif  // HIPFORMERS_WITH_CUDA

// ---- Host side ----------------------------------------------------------------
struct Args {
  const int32_t* query_start;
  const int32_t* seq_lens;
  const int32_t* block_table;
  int table_stride, heads, kv_heads, group, D, window, mode;
  float scale;
  bool hopper;  // AttentionSpec::hopper_kernels
  int64_t pool_rows;  // rows of head_dim elements in each K/V pool
};

template <typename T, int kD, int kBQ, int kBK>
void launch_prefill_simt(const Args& a, const T* q, const T* kp, const T* vp, T* out, const PagedBatch& batch,
                         gpuStream_t s) {
  const dim3 grid(static_cast<unsigned>((batch.max_query_len + kBQ - 1) / kBQ), static_cast<unsigned>(a.heads),
                  static_cast<unsigned>(batch.num_seqs));
  paged_prefill_simt_kernel<T, kD, kBQ, kBK><<<grid, kPrefillThreads, 0, s>>>(
      q, kp, vp, out, a.query_start, a.seq_lens, a.block_table, a.table_stride, a.heads, a.kv_heads, a.group, a.D,
      a.scale, a.window, a.mode);
}

#if defined(HIPFORMERS_WITH_CUDA)
template <typename T, int kD>
void launch_prefill_mma(const Args& a, const T* q, const T* kp, const T* vp, T* out, const PagedBatch& batch,
                        gpuStream_t s) {
  constexpr auto bytes = static_cast<int>(MmaLayout<kD>::kBytes);
  constexpr auto kernel = paged_prefill_mma_kernel<T, kD>;
  if constexpr (bytes > 48 * 1024) allow_dynamic_smem<kernel, bytes>("cudaFuncSetAttribute(paged_prefill_mma_kernel)");
  // Tiles slowest, so every (head, sequence) pair's longest tiles start first.
  const dim3 grid(static_cast<unsigned>(a.heads), static_cast<unsigned>(batch.num_seqs),
                  static_cast<unsigned>((batch.max_query_len + kMmaBQ - 1) / kMmaBQ));
  kernel<<<grid, kMmaThreads, bytes, s>>>(q, kp, vp, out, a.query_start, a.seq_lens, a.block_table, a.table_stride,
                                          a.heads, a.kv_heads, a.group, a.scale, a.window);
}
#endif


template <typename T>
void run_prefill(const Args& a, const T* q, const T* kp, const T* vp, T* out, const PagedBatch& batch,
                 gpuStream_t s) {
#if defined(HF_CUDA_FAST_PATHS)
  if constexpr (sizeof(T) == 2) {
    if (a.hopper) {  // flash_attention_3: the TMA kernel on sm_90+ (paged_prefill_sm90_gpu.cu)
      const PrefillLaunch l{a.query_start, a.seq_lens,   a.block_table, a.table_stride,       a.heads,
                            a.kv_heads,    a.group,      a.D,           a.window,             a.scale,
                            static_cast<int>(batch.num_seqs), static_cast<int>(batch.max_query_len)};
      if (launch_prefill_tma<T>(l, q, kp, vp, a.pool_rows, out, s)) return;
    }
    if (a.D == 64) {
      launch_prefill_mma<T, 64>(a, q, kp, vp, out, batch, s);
      check_launch("paged_attention (prefill)");
      return;
    }
    if (a.D == 128) {
      launch_prefill_mma<T, 128>(a, q, kp, vp, out, batch, s);
      check_launch("paged_attention (prefill)");
      return;
    }
  }
#endif
  if (a.D <= 64) launch_prefill_simt<T, 64, 64, 32>(a, q, kp, vp, out, batch, s);
  else if (a.D <= 128) launch_prefill_simt<T, 128, 32, 32>(a, q, kp, vp, out, batch, s);
  else launch_prefill_simt<T, 256, 16, 16>(a, q, kp, vp, out, batch, s);
  check_launch("paged_attention (prefill)");
}

}  // namespace

namespace {
Args make_args(const PagedBatch& batch, const AttentionSpec& spec) {
  Args a{};
  a.query_start = static_cast<const int32_t*>(batch.query_start.raw_data());
  a.seq_lens = static_cast<const int32_t*>(batch.seq_lens.raw_data());
  a.block_table = static_cast<const int32_t*>(batch.block_table.raw_data());
  a.table_stride = static_cast<int>(batch.block_table.size(1));
  a.heads = static_cast<int>(spec.heads);
  a.kv_heads = static_cast<int>(spec.kv_heads);
  a.group = static_cast<int>(spec.heads / spec.kv_heads);
  a.D = static_cast<int>(spec.head_dim);
  a.window = decode_window(spec);
  a.mode = round_mode(spec.dtype);
  a.scale = spec.scale;
  a.hopper = spec.hopper_kernels;
  return a;
}
}  // namespace

void paged_attention(const Tensor& q, const PagedBatch& batch, const PagedKVLayer& cache, const AttentionSpec& spec,
                     Tensor& out, Tensor* scratch) {
  if (batch.num_tokens == 0 || batch.num_seqs == 0) return;
  if (is_decode(batch)) return paged_attention_decode(q, batch, cache, spec, out, scratch);
  gpuStream_t s = stream_for(q.device().index);
  Args a = make_args(batch, spec);
  a.pool_rows = spec.head_dim > 0 ? cache.k.numel() / spec.head_dim : 0;
  dispatch_float(q.dtype(), [&](auto tag) {
    using E = decltype(tag);
    const E* qp = static_cast<const E*>(q.raw_data());
    const E* kp = static_cast<const E*>(cache.k.raw_data());
    const E* vp = static_cast<const E*>(cache.v.raw_data());
    E* op = static_cast<E*>(out.mutable_raw_data());
    run_prefill<E>(a, qp, kp, vp, op, batch, s);
  });
}

}  // namespace hipformers::kernels::gpu
