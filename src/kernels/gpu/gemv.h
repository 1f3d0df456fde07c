// The small-batch GEMV (rows <= 8: decode projections), as block-level
// device code: gemv_kernel in linear_gpu.cu runs one GemvBlock per block.
//
// Layout. A warp owns kGemvFeatures (R = 4) weight rows; its lanes split the
// in dimension in 16-byte vectors of W (8 bf16/f16 or 4 f32 values), lane l
// taking vectors l, l + S*warp, ... A block is 256 threads; with split S > 1
// the S warps of a group split K further (vectors s*warp + l, ...) and their
// sums meet in shared memory. S grows (1, 2, 4, 8) while the grid has fewer
// than ~8 warp tasks per SM (GemvGrid, linear_gpu.cu) and every lane keeps
// at least two vectors, so small out (1024) still fills the GPU. x rows (at most 8) are read as vectors
// through L1 (they are tiny and shared by all warps); each W vector is
// converted once and used for every row: acc[row][feature] in fp32 (fmaf).
// The R x ROWS sums leave the warp by a halving butterfly (N - 1 shuffles
// for N sums instead of N log2(warp)). Bias is added before the single
// rounding (round_to(mode), then the storage rounding), as the tiled kernel
// does. Unaligned W/x or in % (16 / sizeof(T)) != 0 take the same kernel
// with scalar loads.
//
// Latency. In a decode step this kernel is one of a chain of short kernels
// launched dependent (gpu/launch.h). Weights depend on no earlier kernel, so
// a warp loads its first U x R weight vectors into registers (and asks L2
// for the rest of its slice) before grid_dependency_wait(), and lets the
// next kernel be scheduled at once: while the previous kernel finishes,
// this one's weights are already on their way. Later chunks are double
// buffered (the next chunk's loads are issued before the current one is
// used).
//
// Output. kOutputPlain: feature f of the warp is weight row 4g + f. With
// kOutputSwiGLU the weight is [gate; up] (2 * out rows) and the warp's rows
// are gate c, c + 1 and up c, c + 1 for c = 2g; the epilogue stores
// round(round(silu(g)) * u) of the rounded projections, as
// silu_and_mul_packed would on the stored gate|up.
//
// Phases of a block (GemvBlock): load_first() puts the first chunk of its
// first tile into registers (and, with kInputNorm, the norm weight into
// shared memory) and prefetch_l2() asks L2 for every other line the block
// will read; both touch weights only, so they may run before the inputs
// exist. run() then computes every tile of the block (tiles b, b + grid,
// ...: the grid may be smaller than the number of tiles). A residual update
// reads its residual element when the tile starts, so that load's latency
// hides behind the tile's weight stream.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hipformers/core/dtype.h"

#include "gpu_types.h"
#include "launch.h"
#include "vec16.h"

namespace hipformers::kernels::gpu {

constexpr int kGemvThreads = 256;
constexpr int kGemvFeatures = 4;

template <typename T, bool kVec> struct GemvIO;
template <typename T> struct GemvIO<T, true> {
  static constexpr int V = kVec16<T>;
  using Raw = uint4;
  __device__ __forceinline__ static Raw load_w(const T* p) {
#if defined(HIPFORMERS_WITH_CUDA)
    return __ldcs(reinterpret_cast<const uint4*>(p));
#else
    return *reinterpret_cast<const uint4*>(p);
#endif
  }
  __device__ __forceinline__ static Raw load_x(const T* p) {
#if defined(HIPFORMERS_WITH_CUDA)
    return __ldg(reinterpret_cast<const uint4*>(p));
#else
    return *reinterpret_cast<const uint4*>(p);
#endif
  }
  __device__ __forceinline__ static float get(const Raw& r, int e) { return vec16_get<T>(r, e); }
};
template <typename T> struct GemvIO<T, false> {
  static constexpr int V = 1;
  using Raw = float;
  __device__ __forceinline__ static Raw load_w(const T* p) { return load(p); }
  __device__ __forceinline__ static Raw load_x(const T* p) { return load(p); }
  __device__ __forceinline__ static float get(const Raw& r, int) { return r; }
};

// Sums acc[0..n) over the warp's lanes: each halving step (lanes at
// distance `off`) keeps half of the values, so after log2(n) steps a lane
// holds one sum, that of index `idx`; the remaining steps add plainly.
template <int n, int off> __device__ __forceinline__ void butterfly_sum(float* acc, int lane, int& idx) {
  if constexpr (off > 0) {
    if constexpr (n > 1) {
      constexpr int half = n / 2;
      const bool upper = (lane & off) != 0;
#pragma unroll
      for (int i = 0; i < half; ++i) {
        const float send = upper ? acc[i] : acc[i + half];
        const float keep = upper ? acc[i + half] : acc[i];
        acc[i] = keep + shfl_xor(send, off);
      }
      if (upper) idx += half;
      butterfly_sum<half, off / 2>(acc, lane, idx);
    } else {
      acc[0] += shfl_xor(acc[0], off);
      butterfly_sum<1, off / 2>(acc, lane, idx);
    }
  }
}

// The index of the sum butterfly_sum<n, off> leaves in `lane`.
template <int n, int off> __device__ __forceinline__ int butterfly_index(int lane) {
  if constexpr (off > 0 && n > 1) return ((lane & off) != 0 ? n / 2 : 0) + butterfly_index<n / 2, off / 2>(lane);
  else return 0;
}

// v as the storage type holds it after round_to(mode) and store().
template <typename T> __device__ __forceinline__ float stored(float v, int mode) {
  T t;
  store(&t, round_to(v, mode));
  return load(&t);
}

// y[r, c] = v (+ bias), then the residual update with res_old, the
// residual's value read when the tile began.
template <typename T>
__device__ __forceinline__ void gemv_store(T* y, float v, int r, int64_t c, int64_t out_f, int mode, T* residual,
                                           float res_old) {
  store(y + r * out_f + c, round_to(v, mode));
  // add_rms_norm's residual update: round(y as stored + residual)
  if (residual) store(residual + r * out_f + c, round_to(stored<T>(v, mode) + res_old, mode));
}

// What the GEMV folds into its input and output (fused_linear, linear.h).
enum GemvInput : int { kInputPlain = 0, kInputNorm = 1 };
enum GemvOutput : int { kOutputPlain = 0, kOutputSwiGLU = 1 };

struct GemvFusion {
  const void* norm_w = nullptr;  // kInputNorm
  float eps = 0;
  void* residual = nullptr;      // residual = round(residual + y) after y is stored
};

// One GEMV: y[rows, out_f] = x[rows, in_f] W^T (+ bias), with the fusions.
// out_f: output features (for kOutputSwiGLU, half the weight's rows).
// split: warps of a feature group that split in_f (a power of two <= the
// block's warps).
template <typename T> struct GemvArgs {
  const T* x = nullptr;
  const T* w = nullptr;
  const T* bias = nullptr;
  T* y = nullptr;
  int rows = 0;
  int64_t out_f = 0, in_f = 0;
  int split = 1;
  int mode = 0;
  // Tiles per block kept asked of L2 ahead of the one being computed
  // (gemv_prefetch_tiles): all of them for weights that fit in L2 with room
  // to spare, fewer for the lm_head, whose lines would otherwise be evicted
  // before their loads reach them and be read from memory twice.
  int prefetch_tiles = 1 << 30;
  GemvFusion fusion{};
};

// rms_norm(x) * norm_w for the block's rows into shared memory (rows * in
// values of T, rounded as the rms_norm kernel rounds them): warp w takes
// rows w, w + warps, ...; its lanes sum squares over 16-byte vectors where
// the rows allow (kVec), then the butterfly. nw: the norm weight, already
// in shared memory (gemv_stage_norm_weight), so after the row's own loads
// (the second pass over it hits L1) nothing waits on L2.
template <typename T>
__device__ __forceinline__ void gemv_stage_norm_weight(const T* norm_w, T* nw, int64_t in_f) {
  for (int64_t i = threadIdx.x; i < in_f; i += blockDim.x) nw[i] = norm_w[i];
}

template <typename T, bool kVec>
__device__ __forceinline__ void gemv_norm_input(const T* x, const T* nw, T* xs, int rows, int64_t in_f,
                                                const GemvFusion& fusion, int mode) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  for (int r = warp; r < rows; r += warps) {
    const T* xr = x + static_cast<int64_t>(r) * in_f;
    T* out = xs + static_cast<int64_t>(r) * in_f;
    float sum = 0;
    if constexpr (kVec) {
      constexpr int V = kVec16<T>;
      for (int64_t j = lane; j < in_f / V; j += kWarp) {
        const uint4 u = *reinterpret_cast<const uint4*>(xr + j * V);
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const float v = vec16_get<T>(u, e);
          sum = fmaf(v, v, sum);
        }
      }
    } else {
      for (int64_t i = lane; i < in_f; i += kWarp) {
        const float v = load(xr + i);
        sum = fmaf(v, v, sum);
      }
    }
    sum = warp_sum(sum);
    const float inv = 1.0f / sqrtf(sum / static_cast<float>(in_f) + fusion.eps);
    if constexpr (kVec) {
      constexpr int V = kVec16<T>;
      for (int64_t j = lane; j < in_f / V; j += kWarp) {
        const uint4 u = *reinterpret_cast<const uint4*>(xr + j * V);
        const uint4 wv = *reinterpret_cast<const uint4*>(nw + j * V);
        uint4 o;
#pragma unroll
        for (int e = 0; e < V; ++e)
          vec16_put<T>(o, e, round_to(vec16_get<T>(wv, e) * round_to(vec16_get<T>(u, e) * inv, mode), mode));
        *reinterpret_cast<uint4*>(out + j * V) = o;
      }
    } else {
      for (int64_t i = lane; i < in_f; i += kWarp)
        store(out + i, round_to(load(nw + i) * round_to(load(xr + i) * inv, mode), mode));
    }
  }
  __syncthreads();
}

template <typename T, int ROWS, bool kVec, int kInput, int kOutput> struct GemvBlock {
  using IO = GemvIO<T, kVec>;
  using Raw = typename IO::Raw;
  static constexpr int R = kGemvFeatures, V = IO::V, N = ROWS * R;
  static constexpr int U = ROWS <= 2 ? 2 : 1;  // vectors per feature in flight per lane
  static constexpr bool kSwiGLU = kOutput == kOutputSwiGLU;
  static constexpr int kOuts = kSwiGLU ? 2 : R;  // output features per group
  static_assert(N <= kWarp, "one sum per lane after the butterfly");

  GemvArgs<T> a;
  int64_t block, grid, tiles, nv, step, chunk, j0;
  int lane, warp, groups, s;
  const T* wrow[R];
  Raw wv[U][R];

  __device__ __forceinline__ GemvBlock(const GemvArgs<T>& args, int64_t block_index, int64_t grid_blocks)
      : a(args), block(block_index), grid(grid_blocks) {
    lane = threadIdx.x % kWarp;
    warp = threadIdx.x / kWarp;
    groups = (kGemvThreads / kWarp) / a.split;  // feature groups per tile
    tiles = ((a.out_f + kOuts - 1) / kOuts + groups - 1) / groups;
    s = warp % a.split;
    nv = a.in_f / V;
    step = static_cast<int64_t>(a.split) * kWarp;
    chunk = step * U;
    j0 = static_cast<int64_t>(s) * kWarp + lane;
  }

  // The weight rows of this warp's group in a tile.
  __device__ __forceinline__ void rows_of(int64_t tile, const T* (&rows)[R]) const {
    const int64_t group = tile * groups + warp / a.split;
#pragma unroll
    for (int f = 0; f < R; ++f) {
      int64_t wr;
      if constexpr (kSwiGLU) {
        const int64_t c = group * 2 + f % 2 < a.out_f ? group * 2 + f % 2 : a.out_f - 1;
        wr = f < 2 ? c : a.out_f + c;
      } else {
        wr = group * R + f < a.out_f ? group * R + f : a.out_f - 1;
      }
      rows[f] = a.w + wr * a.in_f;
    }
  }
  __device__ __forceinline__ void load_chunk(int64_t j) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int f = 0; f < R; ++f) wv[u][f] = j + u * step < nv ? IO::load_w(wrow[f] + (j + u * step) * V) : Raw{};
  }

  // kInputNorm: shared memory holds the norm weight (in_f values), then the
  // normalised rows (rows * in_f): gemv_fused_bytes.
  __device__ __forceinline__ T* fused_shared() const {
    extern __shared__ uint4 fused_x[];
    return reinterpret_cast<T*>(fused_x);
  }

  __device__ __forceinline__ void load_first() {
    if (block >= tiles) return;
    rows_of(block, wrow);
    load_chunk(j0);
    if constexpr (kInput == kInputNorm) gemv_stage_norm_weight(static_cast<const T*>(a.fusion.norm_w), fused_shared(), a.in_f);
  }

  // One prefetch per 128-byte line of the warp's weight rows in `tile`,
  // from vector j_start on.
  __device__ __forceinline__ void prefetch_tile(int64_t tile, int64_t j_start) const {
    const T* prow[R];
    rows_of(tile, prow);
    for (int64_t j = j_start; j < nv; j += step)
      if ((j * V * static_cast<int64_t>(sizeof(T))) % 128 < static_cast<int64_t>(V * sizeof(T)))
#pragma unroll
        for (int f = 0; f < R; ++f) prefetch_l2_line(prow[f] + j * V);
  }
  // The block's first prefetch_tiles tiles, skipping the chunk load_first()
  // brings; run() asks for each later tile prefetch_tiles tiles ahead.
  __device__ __forceinline__ void prefetch_l2() const {
    int64_t k = 0;
    for (int64_t tile = block; tile < tiles && k < a.prefetch_tiles; tile += grid, ++k)
      prefetch_tile(tile, tile == block ? j0 + chunk : j0);
  }

  // Every tile of the block, once x (and the residual) are ready. Needs
  // rows * in_f values of shared memory (dynamic) for kInputNorm.
  __device__ __forceinline__ void run() {
    __shared__ float partial[kGemvThreads / kWarp][N];
    if (block >= tiles) return;
    const T* xbase = a.x;
    if constexpr (kInput == kInputNorm) {  // once per block, for all its tiles
      const T* nw = fused_shared();
      T* xs = fused_shared() + a.in_f;
      __syncthreads();  // the staged norm weight
      gemv_norm_input<T, kVec>(a.x, nw, xs, a.rows, a.in_f, a.fusion, a.mode);
      xbase = xs;
    }
    const T* xrow[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) xrow[r] = xbase + static_cast<int64_t>(r < a.rows ? r : a.rows - 1) * a.in_f;
    T* residual = static_cast<T*>(a.fusion.residual);
    const int tid = static_cast<int>(threadIdx.x);
    const int split = a.split;
    const int64_t ahead = static_cast<int64_t>(a.prefetch_tiles) * grid;
    for (int64_t tile = block; tile < tiles; tile += grid) {
      if (tile + ahead < tiles && tile + ahead >= block) prefetch_tile(tile + ahead, j0);
      // The output this thread stores for the tile (if any), and with a
      // residual update that element's old value, loaded now.
      int out_r = -1;
      int64_t out_c = 0;
      if (!kSwiGLU && split == 1) {
        const int idx = butterfly_index<N, kWarp / 2>(lane);
        out_r = lane % (kWarp / N) == 0 ? idx / R : -1;
        out_c = (tile * groups + warp) * R + idx % R;
      } else if (tid < groups * ROWS * kOuts) {
        const int64_t grp = tile * groups + tid / (ROWS * kOuts);
        out_r = tid / kOuts % ROWS;
        out_c = kSwiGLU ? grp * 2 + tid % kOuts : grp * R + tid % kOuts;
      }
      if (out_r >= a.rows || out_c >= a.out_f) out_r = -1;
      const float res_old = residual && out_r >= 0 ? load(residual + out_r * a.out_f + out_c) : 0.0f;
      float acc[N];
#pragma unroll
      for (int i = 0; i < N; ++i) acc[i] = 0.0f;
      for (int64_t j = j0; j < nv; j += chunk) {
        Raw cur[U][R];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int f = 0; f < R; ++f) cur[u][f] = wv[u][f];
        // The next chunk in flight while this one is used: of this tile, or
        // the first of the block's next tile (no bubble between tiles).
        if (j + chunk < nv) {
          load_chunk(j + chunk);
        } else if (tile + grid < tiles) {
          rows_of(tile + grid, wrow);
          load_chunk(j0);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t jj = j + u * step;
          if (jj >= nv) break;
          float wf[R][V];
#pragma unroll
          for (int f = 0; f < R; ++f)
#pragma unroll
            for (int e = 0; e < V; ++e) wf[f][e] = IO::get(cur[u][f], e);
#pragma unroll
          for (int r = 0; r < ROWS; ++r) {
            Raw xv;
            if constexpr (kInput != kInputPlain && kVec) xv = *reinterpret_cast<const uint4*>(xrow[r] + jj * V);
            else if constexpr (kInput != kInputPlain) xv = load(xrow[r] + jj * V);
            else xv = IO::load_x(xrow[r] + jj * V);
#pragma unroll
            for (int e = 0; e < V; ++e) {
              const float xe = IO::get(xv, e);
#pragma unroll
              for (int f = 0; f < R; ++f) acc[r * R + f] = fmaf(xe, wf[f][e], acc[r * R + f]);
            }
          }
        }
      }
      int idx = 0;
      butterfly_sum<N, kWarp / 2>(acc, lane, idx);
      const bool holder = lane % (kWarp / N) == 0;  // lanes holding distinct sums
      if (!kSwiGLU && split == 1) {
        if (out_r >= 0)
          gemv_store(a.y, acc[0] + (a.bias ? load(a.bias + out_c) : 0.0f), out_r, out_c, a.out_f, a.mode, residual,
                     res_old);
        continue;  // no shared memory used: no barrier needed
      }
      if (holder) partial[warp][idx] = acc[0];
      __syncthreads();
      // One thread per (group, row, output feature) of the tile adds the splits.
      if (out_r >= 0) {
        const int g = tid / (ROWS * kOuts), r = out_r, o = tid % kOuts;
        const int64_t c = out_c;
        auto sum_splits = [&](int i) {
          float v = partial[g * split][i];
          for (int q = 1; q < split; ++q) v += partial[g * split + q][i];
          return v;
        };
        if constexpr (kSwiGLU) {
          // The projections as the unfused GEMV would have stored them.
          const float gate = stored<T>(sum_splits(r * R + o) + (a.bias ? load(a.bias + c) : 0.0f), a.mode);
          const float up = stored<T>(sum_splits(r * R + 2 + o) + (a.bias ? load(a.bias + a.out_f + c) : 0.0f), a.mode);
          const float silu = gate / (1.0f + expf(-gate));
          gemv_store(a.y, round_to(silu, a.mode) * up, r, c, a.out_f, a.mode, residual, res_old);
        } else {
          gemv_store(a.y, sum_splits(r * R + o) + (a.bias ? load(a.bias + c) : 0.0f), r, c, a.out_f, a.mode,
                     residual, res_old);
        }
      }
      __syncthreads();  // partial is rewritten by the next tile
    }
  }
};

// ---- host side -----------------------------------------------------------------
// Feature groups (one warp's output features) of a GEMV with out_f outputs.
inline int64_t gemv_groups(int64_t out_f, int output) {
  const int64_t per_group = output == kOutputSwiGLU ? 2 : kGemvFeatures;
  return (out_f + per_group - 1) / per_group;
}
// The K split: doubles (up to the block's warps) while the grid holds fewer
// than target_tasks warp tasks and every lane keeps at least two vectors.
inline int gemv_split(int64_t groups, int64_t nv, int warps, int warp_width, int64_t target_tasks) {
  int split = 1;
  while (split < warps && groups * split < target_tasks && nv >= static_cast<int64_t>(split) * 2 * warp_width)
    split *= 2;
  return split;
}
// Tiles per block to keep asked of L2 ahead (GemvArgs::prefetch_tiles):
// as many rounds of the whole grid's tiles as fit in l2_budget bytes, at
// least one; l2_budget 0: every tile at once.
inline int gemv_prefetch_tiles(int64_t blocks, int64_t groups_per_tile, int64_t in_f, std::size_t elem_bytes,
                               int64_t l2_budget) {
  if (l2_budget <= 0) return 1 << 30;
  const int64_t round = blocks * groups_per_tile * kGemvFeatures * in_f * static_cast<int64_t>(elem_bytes);
  const int64_t rounds = round > 0 ? l2_budget / round : 1;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(rounds, 1 << 30)));
}

// Shared memory a normalised input needs (0 for a plain one): GemvBlock::fused_shared.
inline std::size_t gemv_fused_bytes(int input, int64_t rows, int64_t in_f, DType storage) {
  // The norm weight, then the normalised rows.
  return input == kInputPlain ? 0 : static_cast<std::size_t>((rows + 1) * in_f) * dtype_size(storage);
}

}  // namespace hipformers::kernels::gpu
