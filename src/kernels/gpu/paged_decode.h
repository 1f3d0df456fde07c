// Split-K ("flash-decoding") attention over the paged KV cache, as
// block-level device code: paged_decode_kernel (paged_attention_gpu.cu) runs
// one paged_decode_block per block. The host side (decode_plan) decides how
// a step is cut and where the scratch lies; paged_attention_gpu.cu uses the
// same plan to size the scratch.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "gpu_types.h"
#include "launch.h"
#include "qk_norm_rope.h"
#include "vec16.h"
#include "hipformers/kernels/paged_attention.h"

namespace hipformers::kernels::gpu {

constexpr int kPage = static_cast<int>(kKVPageSize);
// Decode: blocks to aim for (a few per SM of the largest GPUs) when choosing
// how many splits a sequence's pages get.
constexpr int64_t kDecodeTargetBlocks = 512;
constexpr int kDecodeThreads = 128;

// A load that sees other blocks' stores made visible by __threadfence()
// (from L2: the L1 of this SM may hold a stale line).
__device__ __forceinline__ float load_coherent(const float* p) {
#if defined(HIPFORMERS_WITH_CUDA)
  return __ldcg(p);
#else
  return *static_cast<const volatile float*>(p);
#endif
}

__device__ __forceinline__ float neg_inf() { return -std::numeric_limits<float>::infinity(); }

// ---- Vector loads ------------------------------------------------------------
// kVec elements of T from a (kVec * sizeof(T))-byte aligned address, converted
// to float exactly as load() does.
template <typename T> __device__ __forceinline__ float from_bits(uint32_t bits);
template <> __device__ __forceinline__ float from_bits<float>(uint32_t bits) { return __uint_as_float(bits); }
template <> __device__ __forceinline__ float from_bits<gpu_bf16>(uint32_t bits) {
  return bf16_bits_to_float(static_cast<uint16_t>(bits));
}
template <> __device__ __forceinline__ float from_bits<gpu_half>(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

template <typename T, int kVec> __device__ __forceinline__ void load_vec(const T* p, float (&out)[kVec]) {
  constexpr int kBytes = kVec * static_cast<int>(sizeof(T));
  static_assert(kBytes == 16 || kBytes == 8 || kBytes == 4, "vector loads of 4, 8 or 16 bytes");
  uint32_t w[kBytes / 4];
  if constexpr (kBytes == 16) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    w[0] = u.x;
    w[1] = u.y;
    w[2] = u.z;
    w[3] = u.w;
  } else if constexpr (kBytes == 8) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    w[0] = u.x;
    w[1] = u.y;
  } else {
    w[0] = *reinterpret_cast<const uint32_t*>(p);
  }
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    if constexpr (sizeof(T) == 4) out[i] = from_bits<T>(w[i]);
    else out[i] = from_bits<T>((w[i / 2] >> (16 * (i % 2))) & 0xffffu);
  }
}

// ---- Decode: split-K ---------------------------------------------------------
// kD: the largest head_dim handled (runtime D <= kD, D a multiple of kVec);
// kLanes lanes share one key row, each loading kVec elements at a time
// (kLanes <= 32, so a row's lanes sit in one warp of either width); kG query
// heads per block.
//
// kFused: q is the q|k|v projection output ([tokens, (heads + 2 kv_heads) D])
// and the kernel first does qkv_rope_write's work for its sequence: q/k norm
// and RoPE of its query heads (into shared memory), and, in the blocks whose
// range holds the new key (the last split), k and v of this kv head, used
// from shared memory and written to the cache by head chunk 0.
struct DecodeQkv {
  const void* q_norm = nullptr;  // T [D] or null
  const void* k_norm = nullptr;
  void* k_pool = nullptr;  // the pools again, writable
  void* v_pool = nullptr;
  QkNormRope rope{};
};

// Everything one decode launch reads (the kernel's arguments, as one struct).
template <typename T> struct DecodeParams {
  const T* q = nullptr;
  const T* kpool = nullptr;
  const T* vpool = nullptr;
  T* out = nullptr;
  float* partial = nullptr;
  const int32_t* query_start = nullptr;
  const int32_t* seq_lens = nullptr;
  const int32_t* block_table = nullptr;
  int table_stride = 0, heads = 0, kv_heads = 0, group = 0, head_chunks = 1, D = 0;
  float scale = 0;
  int window = 0, mode = 0, pages_per_split = 1, splits = 1;
  int* counters = nullptr;
  DecodeQkv fused{};
};

// After a split block wrote its partials (max, sum, acc[D] of query heads
// h0 + [0, ng)): the last split of (sequence b, block column) to arrive
// combines every split's partials into the output. Called by every thread
// of the block.
template <typename T>
__device__ __forceinline__ void merge_splits(const DecodeParams<T>& p, int b, int h0, int ng, int row, int first,
                                             int pos, int span) {
  const int heads = p.heads, D = p.D, mode = p.mode, splits = p.splits;
  const float* partial = p.partial;
  T* out = p.out;
  int* counters = p.counters;
  // The splits holding visible keys are exactly [first / span, pos / span];
  // the last of them to get here combines them.
  const int s0 = first / span, s1 = min(pos / span, splits - 1);
  __shared__ int s_is_last;
  __threadfence();  // this block's partial is visible before its arrival is counted
  __syncthreads();
  if (threadIdx.x == 0) {
    int* counter = counters + static_cast<int64_t>(b) * heads + h0;  // one per block column
    const int arrived = atomicAdd(counter, 1) + 1;
    s_is_last = arrived == s1 - s0 + 1;
    if (s_is_last) *counter = 0;  // ready for the next launch (graph replays)
  }
  __syncthreads();
  if (!s_is_last) return;
  __threadfence();  // the other splits' partials, made visible before their arrival
  // out = sum_q acc_q e^(m_q - mx) / sum_q l_q e^(m_q - mx), mx = max_q m_q,
  // for each output element (head gg, dim d) of the block. Up to
  // kMergeSplits splits, every partial an element needs is loaded at once
  // (one memory round trip per element a thread takes, instead of three
  // dependent passes per head); more splits (long contexts) take the three
  // passes. Both add in the same order.
  constexpr int kMergeSplits = 8;
  const int nsplit = s1 - s0 + 1;
  for (int idx = threadIdx.x; idx < ng * D; idx += static_cast<int>(blockDim.x)) {
    const int gg = idx / D, d = idx % D, h = h0 + gg;
    const float* ph = partial + ((static_cast<int64_t>(b) * heads + h) * splits + s0) * (D + 2);
    float mx = neg_inf(), sum = 0.0f, a = 0.0f;
    if (nsplit <= kMergeSplits) {
      float pm[kMergeSplits], pl[kMergeSplits], pa[kMergeSplits];
#pragma unroll
      for (int q = 0; q < kMergeSplits; ++q) {
        const float* pq = ph + static_cast<int64_t>(q) * (D + 2);
        pm[q] = q < nsplit ? load_coherent(pq) : neg_inf();
        pl[q] = q < nsplit ? load_coherent(pq + 1) : 0.0f;
        pa[q] = q < nsplit ? load_coherent(pq + 2 + d) : 0.0f;
      }
#pragma unroll
      for (int q = 0; q < kMergeSplits; ++q) mx = fmaxf(mx, pm[q]);
#pragma unroll
      for (int q = 0; q < kMergeSplits; ++q)
        if (q < nsplit) {
          const float w = expf(pm[q] - mx);
          sum += pl[q] * w;
          a = fmaf(pa[q], w, a);
        }
    } else {
      for (int q = 0; q < nsplit; ++q) mx = fmaxf(mx, load_coherent(ph + static_cast<int64_t>(q) * (D + 2)));
      for (int q = 0; q < nsplit; ++q) {
        const float* pq = ph + static_cast<int64_t>(q) * (D + 2);
        const float w = expf(load_coherent(pq) - mx);
        sum += load_coherent(pq + 1) * w;
        a = fmaf(load_coherent(pq + 2 + d), w, a);
      }
    }
    store(out + (static_cast<int64_t>(row) * heads + h) * D + d, round_to(a / sum, mode));
  }
}

// One block's work: split `split` of block column `column` (kv head x head
// chunk) of sequence b. Called by every thread of a block
// of kDecodeThreads threads; returns early (block-uniformly) where the range holds
// no visible key. Waits for the previous kernel (grid_dependency_wait) itself,
// once it has loaded what does not depend on it.
template <typename T, int kD, int kVec, int kLanes, int kG, bool kFused>
__device__ __forceinline__ void paged_decode_block(const DecodeParams<T>& p, int split, int column, int b) {
  const T* q = p.q;
  const T* kpool = p.kpool;
  const T* vpool = p.vpool;
  T* out = p.out;
  float* partial = p.partial;
  const int32_t* query_start = p.query_start;
  const int32_t* seq_lens = p.seq_lens;
  const int32_t* block_table = p.block_table;
  const int table_stride = p.table_stride, heads = p.heads, kv_heads = p.kv_heads, group = p.group;
  const int head_chunks = p.head_chunks, D = p.D, window = p.window, mode = p.mode;
  const int pages_per_split = p.pages_per_split, splits = p.splits;
  const float scale = p.scale;
  const DecodeQkv& fused = p.fused;
  constexpr int kChunks = kD / (kVec * kLanes);  // vectors per lane
  constexpr int kPer = kChunks * kVec;           // dims per lane
  constexpr int kRows = kDecodeThreads / kLanes; // key rows in flight
  constexpr int kWarps = kDecodeThreads / kWarp;
  constexpr int kKeysPerLane = kPage / kWarp;    // softmax: keys of a tile per lane
  constexpr int kIters = kPage / kRows;          // key rows per thread and page
  // Key rows whose vectors a thread holds at once (at most 64 floats).
  constexpr int kBatch = kIters * kChunks * kVec <= 64 ? kIters : (64 / (kChunks * kVec) > 0 ? 64 / (kChunks * kVec) : 1);
  static_assert(kIters % kBatch == 0, "decode batches");
  static_assert(kLanes <= 32 && kD % (kVec * kLanes) == 0 && kPage % kRows == 0, "decode tiling");
  __shared__ float s_p[kG][kPage];
  __shared__ float s_corr[kG], s_m[kG], s_l[kG];
  __shared__ float s_red[kG][kD];

  const int g = column / head_chunks, chunk = column % head_chunks;
  const int h0 = g * group + chunk * kG;
  const int ng = min(kG, group - chunk * kG);
  // Before the dependent wait (gpu/launch.h) the block reads only what no
  // kernel of this step writes: the step's metadata (copied before the step
  // is enqueued) and the keys/values of earlier steps (< pos).
  const int len = seq_lens[b];
  const int row = query_start[b];
  if (len <= 0) {  // no keys: a zero output (written once, by split 0)
    grid_dependency_wait();
    if (split == 0)
      for (int idx = threadIdx.x; idx < ng * D; idx += kDecodeThreads)
        store(out + (static_cast<int64_t>(row) * heads + h0 + idx / D) * D + idx % D, 0.0f);
    return;
  }
  const int pos = len - 1;
  const int first = window > 0 ? max(0, pos - window + 1) : 0;
  const int span = pages_per_split * kPage;
  const int begin = max(split * span, first), end = min(split * span + span, len);
  if (begin >= end) return;  // holds no visible key: not counted by the merge either
  const int lane = threadIdx.x % kLanes, rgroup = threadIdx.x / kLanes;
  const int wlane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int32_t* table = block_table + static_cast<int64_t>(b) * table_stride;
  const int ts0 = begin / kPage * kPage;

  // The first page's keys (but key pos, this step's) go into registers, and
  // L2 is asked for every other K/V line of the range, while the previous
  // kernel still runs. Only where the whole page fits the key registers.
  constexpr bool kPreload = kBatch == kIters;
  float kreg[kBatch][kChunks][kVec];
  // The first page's values too, where registers allow (up to 4 heads a
  // block: 253 registers at 8 without them).
  constexpr bool kPreloadV = kPreload && kG <= 4;
  float vreg[kBatch][kChunks][kVec];
  __shared__ float s_kv[kFused ? 2 : 1][kFused ? kD : 1];  // kFused: the new key's k and v (as stored)
  const bool has_new = kFused && end == len;  // this range holds key pos
  // Key rows it0 + [0, kBatch) of the page at ts (rows: its K or V) into
  // kreg: kOld takes the keys before pos (zeros elsewhere: usable before
  // the wait), kNew only key pos, kAll every visible key; key pos comes
  // from `fresh` (shared memory) where this block computed it.
  enum Rows { kOld, kNew, kAll };
  auto load_rows = [&](float (&dst)[kBatch][kChunks][kVec], const T* rows, const float* fresh, int ts, int it0,
                       Rows what) {
#pragma unroll
    for (int ib = 0; ib < kBatch; ++ib) {
      const int j = rgroup + (it0 + ib) * kRows, key = ts + j;
      const bool valid = key >= begin && key < end && (what != kOld || key != pos);
      if (what == kNew && key != pos) continue;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int d0 = (c * kLanes + lane) * kVec;
        if (what != kOld && has_new && key == pos && d0 < D)
#pragma unroll
          for (int e = 0; e < kVec; ++e) dst[ib][c][e] = fresh[kFused ? d0 + e : 0];
        else if (valid && d0 < D) load_vec<T, kVec>(rows + static_cast<int64_t>(j) * D + d0, dst[ib][c]);
        else
#pragma unroll
          for (int e = 0; e < kVec; ++e) dst[ib][c][e] = 0.0f;  // masked rows add 0 * 0
      }
    }
  };
  const int64_t base0 = (static_cast<int64_t>(table[ts0 / kPage]) * kv_heads + g) * kPage * D;
  if constexpr (kPreload) load_rows(kreg, kpool + base0, nullptr, ts0, 0, kOld);
  if constexpr (kPreloadV) load_rows(vreg, vpool + base0, nullptr, ts0, 0, kOld);
  for (int ts = ts0; ts < end; ts += kPage) {
    const int64_t base = ts == ts0 ? base0 : (static_cast<int64_t>(table[ts / kPage]) * kv_heads + g) * kPage * D;
    for (int j = rgroup; j < kPage; j += kRows) {
      const int key = ts + j;
      if (key < begin || key >= end || key == pos) continue;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int d0 = (c * kLanes + lane) * kVec;
        if (d0 < D && (d0 * static_cast<int>(sizeof(T))) % 128 == 0) {
          if (!kPreload || ts != ts0) prefetch_l2_line(kpool + base + static_cast<int64_t>(j) * D + d0);
          if (!kPreloadV || ts != ts0) prefetch_l2_line(vpool + base + static_cast<int64_t>(j) * D + d0);
        }
      }
    }
  }
  // RoPE's coefficients for the position (the fused prologue's register path).
  RopeCoefs rope{};
  if constexpr (kFused) {
    if (rope_in_regs(D)) rope = rope_coefs(fused.rope, static_cast<float>(pos), wlane);
  }
  grid_dependency_wait();

  // kFused: the roped q heads.
  __shared__ float s_q[kFused ? kG : 1][kFused ? kD : 1];
  if constexpr (kFused) {
    const T* src = q + static_cast<int64_t>(row) * (heads + 2 * kv_heads) * D;
    const T* q_norm = static_cast<const T*>(fused.q_norm);
    const T* k_norm = static_cast<const T*>(fused.k_norm);
    const float fpos = static_cast<float>(pos);
    const bool regs = rope_in_regs(D);
    for (int task = warp; task < ng + (has_new ? 1 : 0); task += kWarps) {
      const T* head = src + static_cast<int64_t>(task < ng ? h0 + task : heads + g) * D;
      const T* w = task < ng ? q_norm : k_norm;
      auto put = [&](int i, float v) {
        if (task < ng) s_q[task][i] = stored_as<T>(v);
        else s_kv[0][i] = stored_as<T>(v);
      };
      if (regs) norm_rope_head(head, w, fused.rope, rope, wlane, put);
      else norm_rope_head(head, w, fused.rope, fpos, wlane, put);
    }
    if (has_new)
      for (int d = threadIdx.x; d < D; d += kDecodeThreads) s_kv[1][d] = load(src + static_cast<int64_t>(heads + kv_heads + g) * D + d);
    __syncthreads();
    if (has_new && chunk == 0) {  // the cache write (the other chunks' blocks use s_kv alone)
      const int64_t at = ((static_cast<int64_t>(table[pos / kPage]) * kv_heads + g) * kPage + pos % kPage) * D;
      T* kw = static_cast<T*>(fused.k_pool) + at;
      T* vw = static_cast<T*>(fused.v_pool) + at;
      for (int d = threadIdx.x; d < D; d += kDecodeThreads) {
        store(kw + d, s_kv[0][d]);
        store(vw + d, s_kv[1][d]);
      }
    }
  }

  float qr[kG][kPer], acc[kG][kPer];
#pragma unroll
  for (int gg = 0; gg < kG; ++gg)
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d0 = (c * kLanes + lane) * kVec;
      float v[kVec];
      if (kFused && gg < ng && d0 < D)
#pragma unroll
        for (int e = 0; e < kVec; ++e) v[e] = s_q[kFused ? gg : 0][kFused ? d0 + e : 0];
      else if (gg < ng && d0 < D) load_vec<T, kVec>(q + (static_cast<int64_t>(row) * heads + h0 + gg) * D + d0, v);
      else
#pragma unroll
        for (int e = 0; e < kVec; ++e) v[e] = 0.0f;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        qr[gg][c * kVec + e] = v[e];
        acc[gg][c * kVec + e] = 0.0f;
      }
    }
  // Running max and sum of head gg live in warp gg % kWarps (every lane).
  float m[kG], l[kG];
#pragma unroll
  for (int gg = 0; gg < kG; ++gg) {
    m[gg] = neg_inf();
    l[gg] = 0.0f;
  }

  for (int ts = ts0; ts < end; ts += kPage) {
    const int64_t base = ts == ts0 ? base0 : (static_cast<int64_t>(table[ts / kPage]) * kv_heads + g) * kPage * D;
    const T* kb = kpool + base;
    const T* vb = vpool + base;
    // Scores of this page's keys for every head. Every K vector of the page
    // this thread needs is loaded before any is used (kIters independent
    // loads in flight instead of one memory latency per key row); the first
    // page's old keys are in kreg already.
    const bool preloaded = kPreload && ts == ts0;
#pragma unroll
    for (int it0 = 0; it0 < kIters; it0 += kBatch) {
      load_rows(kreg, kb, s_kv[0], ts, it0, preloaded ? kNew : kAll);
#pragma unroll
      for (int ib = 0; ib < kBatch; ++ib) {
        const int j = rgroup + (it0 + ib) * kRows, key = ts + j;
        const bool valid = key >= begin && key < end;
        float s[kG];
#pragma unroll
        for (int gg = 0; gg < kG; ++gg) s[gg] = 0.0f;
#pragma unroll
        for (int c = 0; c < kChunks; ++c)
#pragma unroll
          for (int gg = 0; gg < kG; ++gg)
#pragma unroll
            for (int e = 0; e < kVec; ++e) s[gg] = fmaf(qr[gg][c * kVec + e], kreg[ib][c][e], s[gg]);
#pragma unroll
        for (int gg = 0; gg < kG; ++gg) s[gg] = warp_sum<kLanes>(s[gg]);
        if (lane == 0)
#pragma unroll
          for (int gg = 0; gg < kG; ++gg) s_p[gg][j] = valid ? s[gg] * scale : neg_inf();
      }
    }
    __syncthreads();
    // Online softmax per head over the page: new max, rounded probabilities.
#pragma unroll
    for (int gg = 0; gg < kG; ++gg) {
      if (gg % kWarps != warp || gg >= ng) continue;
      float sv[kKeysPerLane];
      float tmax = neg_inf();
#pragma unroll
      for (int i = 0; i < kKeysPerLane; ++i) {
        sv[i] = s_p[gg][wlane + i * kWarp];
        tmax = fmaxf(tmax, sv[i]);
      }
      tmax = warp_max(tmax);
      const float m_new = fmaxf(m[gg], tmax);  // finite: every page holds a visible key
      const float corr = expf(m[gg] - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kKeysPerLane; ++i) {
        const float e = expf(sv[i] - m_new);  // 0 for masked keys
        sum += e;
        s_p[gg][wlane + i * kWarp] = round_to(e, mode);
      }
      l[gg] = l[gg] * corr + warp_sum(sum);
      m[gg] = m_new;
      if (wlane == 0) s_corr[gg] = corr;
    }
    __syncthreads();
    // acc = acc * corr + p . v
#pragma unroll
    for (int gg = 0; gg < kG; ++gg) {
      const float corr = gg < ng ? s_corr[gg] : 1.0f;
#pragma unroll
      for (int i = 0; i < kPer; ++i) acc[gg][i] *= corr;
    }
    // Likewise every V vector of a batch first, then p . v.
    auto pv = [&](const float (&vr)[kBatch][kChunks][kVec], int it0) {
#pragma unroll
      for (int ib = 0; ib < kBatch; ++ib) {
        const int j = rgroup + (it0 + ib) * kRows;
#pragma unroll
        for (int gg = 0; gg < kG; ++gg) {
          const float p = (ts + j >= begin && ts + j < end) ? s_p[gg][j] : 0.0f;
#pragma unroll
          for (int c = 0; c < kChunks; ++c)
#pragma unroll
            for (int e = 0; e < kVec; ++e) acc[gg][c * kVec + e] = fmaf(p, vr[ib][c][e], acc[gg][c * kVec + e]);
        }
      }
    };
    if (kPreloadV && preloaded) {  // the old values are in vreg already
      load_rows(vreg, vb, s_kv[kFused ? 1 : 0], ts, 0, kNew);
      pv(vreg, 0);
    } else {
#pragma unroll
      for (int it0 = 0; it0 < kIters; it0 += kBatch) {
        load_rows(kreg, vb, s_kv[kFused ? 1 : 0], ts, it0, kAll);
        pv(kreg, it0);
      }
    }
    __syncthreads();  // s_p is rewritten by the next page
  }

  // Sum the row groups' accumulators: first within each warp, then across warps.
#pragma unroll
  for (int off = kLanes; off < kWarp; off *= 2)
#pragma unroll
    for (int gg = 0; gg < kG; ++gg)
#pragma unroll
      for (int i = 0; i < kPer; ++i) acc[gg][i] += shfl_xor(acc[gg][i], off);
#pragma unroll
  for (int gg = 0; gg < kG; ++gg)
    if (gg % kWarps == warp && wlane == 0) {
      s_m[gg] = m[gg];
      s_l[gg] = l[gg];
    }
  for (int w = 0; w < kWarps; ++w) {
    if (warp == w && wlane < kLanes)
#pragma unroll
      for (int gg = 0; gg < kG; ++gg)
#pragma unroll
        for (int c = 0; c < kChunks; ++c)
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            const int d = (c * kLanes + lane) * kVec + e;
            if (w == 0) s_red[gg][d] = acc[gg][c * kVec + e];
            else s_red[gg][d] += acc[gg][c * kVec + e];
          }
    __syncthreads();
  }
  for (int idx = threadIdx.x; idx < ng * D; idx += kDecodeThreads) {
    const int gg = idx / D, d = idx % D, h = h0 + gg;
    if (splits == 1) {
      store(out + (static_cast<int64_t>(row) * heads + h) * D + d, round_to(s_red[gg][d] / s_l[gg], mode));
    } else {
      float* p = partial + ((static_cast<int64_t>(b) * heads + h) * splits + split) * (D + 2);
      if (d == 0) {
        p[0] = s_m[gg];
        p[1] = s_l[gg];
      }
      p[2 + d] = s_red[gg][d];
    }
  }
  if (splits == 1) return;
  merge_splits(p, b, h0, ng, row, first, pos, span);
}

// ---- Decode: one block per 256 keys ("wide") ---------------------------------
// For 16-bit K/V and head_dim 64 or 128. A block of kWideThreads threads
// takes kWideSpan keys of one kv head (kG <= 4 query heads) in one round,
// with no block barrier between the scores and the values:
//   - warp w owns keys w * (W/2) + [0, W/2) (W: the warp width); lane pair
//     (2t, 2t+1) holds key t's two halves of K, each lane D/W dims of V for
//     all of the warp's keys. Both are loaded, as raw 16-bit values, before
//     the dependent wait (all but key pos, this step's).
//   - scores: s = q . k (half a dot per lane, one shuffle), then the warp's
//     own softmax over its keys: m_w = max s, p = e^(s - m_w), l_w = sum p;
//     p rounded to the dtype goes through the warp's shared row to every lane
//     for acc_w = sum_t p_t v_t.
//   - the warps meet once in shared memory: out = sum_w acc_w e^(m_w - M) /
//     sum_w l_w e^(m_w - M), M = max_w m_w, one output element per thread;
//     longer sequences get more blocks (splits) and merge_splits.
// The split kernel above walks a block's pages one at a time with three
// block barriers per page; this one has one barrier after the prologue and
// one before the merge (docs/KERNELS.md).
constexpr int kWideThreads = 512;
constexpr int kWideSpan = 256;      // keys per block, for either warp width
constexpr int kWideMaxHeads = 4;    // query heads per block (kG)

template <typename T, int kD, int kG, bool kFused>
__device__ __forceinline__ void paged_decode_wide_block(const DecodeParams<T>& p, int split, int column, int b) {
  static_assert(sizeof(T) == 2, "16-bit K/V");
  constexpr int kWarps = kWideThreads / kWarp;
  constexpr int kKeys = kWarp / 2;  // keys per warp
  constexpr int kHalf = kD / 2;     // dims of K per lane
  constexpr int kKVecs = kHalf / 8; // its 16-byte vectors
  constexpr int kVd = kD / kWarp;   // dims of V per lane (1, 2 or 4)
  constexpr int kVw = (kVd + 1) / 2;  // 32-bit words of them
  static_assert(kWarps * kKeys == kWideSpan && kWideSpan % kPage == 0 && kPage % kKeys == 0, "wide tiling");
  static_assert(kHalf % 8 == 0 && kVd >= 1 && kVd <= 4 && kG <= kWideMaxHeads, "wide shapes");
  const T* kpool = p.kpool;
  const T* vpool = p.vpool;
  const int heads = p.heads, kv_heads = p.kv_heads, group = p.group, head_chunks = p.head_chunks;
  const int D = kD, mode = p.mode;
  const int g = column / head_chunks, chunk = column % head_chunks;
  const int h0 = g * group + chunk * kG;
  const int ng = min(kG, group - chunk * kG);
  const int len = p.seq_lens[b];
  const int row = p.query_start[b];
  if (len <= 0) {  // no keys: a zero output (written once, by split 0)
    grid_dependency_wait();
    if (split == 0)
      for (int idx = threadIdx.x; idx < ng * D; idx += kWideThreads)
        store(p.out + (static_cast<int64_t>(row) * heads + h0 + idx / D) * D + idx % D, 0.0f);
    return;
  }
  const int pos = len - 1;
  const int first = p.window > 0 ? max(0, pos - p.window + 1) : 0;
  const int begin = max(split * kWideSpan, first), end = min(split * kWideSpan + kWideSpan, len);
  if (begin >= end) return;  // holds no visible key: not counted by the merge either
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int wkey0 = split * kWideSpan + warp * kKeys;  // the warp's first key
  const bool live = wkey0 < end && wkey0 + kKeys > begin;
  const int t = lane / 2, half = lane % 2, key = wkey0 + t;
  const bool visible = key >= begin && key < end;
  const int32_t* table = p.block_table + static_cast<int64_t>(b) * p.table_stride;
  // Offset of the warp's first key row in the pools (its keys share a page).
  const int64_t base =
      live ? ((static_cast<int64_t>(table[wkey0 / kPage]) * kv_heads + g) * kPage + wkey0 % kPage) * D : 0;

  // Before the wait: the keys and values before pos (zeros elsewhere).
  uint4 kr[kKVecs];
  uint32_t vr[kKeys][kVw];
  auto load_k = [&](const T* src) {
#pragma unroll
    for (int i = 0; i < kKVecs; ++i) kr[i] = *reinterpret_cast<const uint4*>(src + half * kHalf + i * 8);
  };
  auto load_v = [&](int tt, const T* src) {
    if constexpr (kVd == 4) {
      const uint2 u = *reinterpret_cast<const uint2*>(src + lane * kVd);
      vr[tt][0] = u.x;
      vr[tt][1] = u.y;
    } else if constexpr (kVd == 2) {
      vr[tt][0] = *reinterpret_cast<const uint32_t*>(src + lane * kVd);
    } else {
      vr[tt][0] = *reinterpret_cast<const uint16_t*>(src + lane);
    }
  };
  if (visible && key != pos) load_k(kpool + base + static_cast<int64_t>(t) * D);
  else
#pragma unroll
    for (int i = 0; i < kKVecs; ++i) kr[i] = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int tt = 0; tt < kKeys; ++tt) {
    const int k = wkey0 + tt;
    if (k >= begin && k < end && k != pos) load_v(tt, vpool + base + static_cast<int64_t>(tt) * D);
    else
#pragma unroll
      for (int w = 0; w < kVw; ++w) vr[tt][w] = 0;
  }
  RopeCoefs rope{};
  if constexpr (kFused) {
    if (rope_in_regs(D)) rope = rope_coefs(p.fused.rope, static_cast<float>(pos), lane);
  }
  grid_dependency_wait();

  // The query heads (roped, as stored) and, fused, key pos's k and v.
  __shared__ __align__(16) T s_q[kG][kD];
  __shared__ __align__(16) T s_new[kFused ? 2 : 1][kFused ? kD : 8];
  const bool has_new = end == len;  // this block holds key pos
  if constexpr (kFused) {
    const DecodeQkv& f = p.fused;
    const T* src = p.q + static_cast<int64_t>(row) * (heads + 2 * kv_heads) * D;
    for (int task = warp; task < ng + (has_new ? 1 : 0); task += kWarps) {
      const T* head = src + static_cast<int64_t>(task < ng ? h0 + task : heads + g) * D;
      const T* w = static_cast<const T*>(task < ng ? f.q_norm : f.k_norm);
      T* dst = task < ng ? s_q[task] : s_new[0];
      auto put = [&](int i, float v) { store(dst + i, v); };
      if (rope_in_regs(D)) norm_rope_head(head, w, f.rope, rope, lane, put);
      else norm_rope_head(head, w, f.rope, static_cast<float>(pos), lane, put);
    }
    if (has_new)
      for (int d = threadIdx.x; d < D; d += kWideThreads) s_new[kFused ? 1 : 0][d] = src[static_cast<int64_t>(heads + kv_heads + g) * D + d];
    for (int idx = threadIdx.x; idx < (kG - ng) * D; idx += kWideThreads) store(&s_q[ng + idx / D][idx % D], 0.0f);
    __syncthreads();
    if (has_new && chunk == 0) {  // the cache write (other chunks' blocks use s_new alone)
      const int64_t at = ((static_cast<int64_t>(table[pos / kPage]) * kv_heads + g) * kPage + pos % kPage) * D;
      T* kw = static_cast<T*>(f.k_pool) + at;
      T* vw = static_cast<T*>(f.v_pool) + at;
      for (int d = threadIdx.x; d < D; d += kWideThreads) {
        kw[d] = s_new[0][d];
        vw[d] = s_new[kFused ? 1 : 0][d];
      }
    }
  } else {
    for (int idx = threadIdx.x; idx < kG * D; idx += kWideThreads) {
      const int gg = idx / D, d = idx % D;
      if (gg < ng) s_q[gg][d] = p.q[(static_cast<int64_t>(row) * heads + h0 + gg) * D + d];
      else store(&s_q[gg][d], 0.0f);
    }
    __syncthreads();
  }
  // Key pos: from shared memory (fused) or, written by the previous kernel, the cache.
  if (has_new && live && pos >= wkey0 && pos < wkey0 + kKeys) {
    const T* kn = kFused ? s_new[0] : kpool + base + static_cast<int64_t>(pos - wkey0) * D;
    const T* vn = kFused ? s_new[kFused ? 1 : 0] : vpool + base + static_cast<int64_t>(pos - wkey0) * D;
    if (key == pos) load_k(kn);
#pragma unroll
    for (int tt = 0; tt < kKeys; ++tt)
      if (wkey0 + tt == pos) load_v(tt, vn);
  }

  // Scores and the warp's softmax.
  __shared__ __align__(16) float s_p[kWarps][kG][kKeys];
  float m[kG], l[kG];
#pragma unroll
  for (int gg = 0; gg < kG; ++gg) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kKVecs; ++i) {
      const uint4 qv = *reinterpret_cast<const uint4*>(&s_q[gg][half * kHalf + i * 8]);
#pragma unroll
      for (int e = 0; e < 8; ++e) s = fmaf(vec16_get<T>(qv, e), vec16_get<T>(kr[i], e), s);
    }
    s += shfl_xor(s, 1);
    s = visible ? s * p.scale : neg_inf();
    float mx = s;
#pragma unroll
    for (int off = 2; off < kWarp; off *= 2) mx = fmaxf(mx, shfl_xor(mx, off));
    const float e = visible ? expf(s - mx) : 0.0f;  // mx finite where any key is visible
    float sum = e;
#pragma unroll
    for (int off = 2; off < kWarp; off *= 2) sum += shfl_xor(sum, off);
    m[gg] = mx;
    l[gg] = sum;
    if (half == 0) s_p[warp][gg][t] = round_to(e, mode);
  }
  warp_sync();
  // acc = sum_t p_t v_t over the warp's keys (masked keys: 0 * 0).
  float acc[kG][kVd];
#pragma unroll
  for (int gg = 0; gg < kG; ++gg) {
#pragma unroll
    for (int e = 0; e < kVd; ++e) acc[gg][e] = 0.0f;
#pragma unroll
    for (int t4 = 0; t4 < kKeys; t4 += 4) {
      const float4 pp = *reinterpret_cast<const float4*>(&s_p[warp][gg][t4]);
      const float pt[4] = {pp.x, pp.y, pp.z, pp.w};
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int e = 0; e < kVd; ++e)
          acc[gg][e] = fmaf(pt[u], from_bits<T>(vr[t4 + u][e / 2] >> (16 * (e % 2))), acc[gg][e]);
    }
  }

  // The warps' (m, l, acc) meet in shared memory.
  __shared__ float s_wm[kWarps][kG], s_wl[kWarps][kG];
  __shared__ __align__(16) float s_wacc[kWarps][kG][kD];
#pragma unroll
  for (int gg = 0; gg < kG; ++gg) {
    if (lane == 0) {
      s_wm[warp][gg] = live ? m[gg] : neg_inf();
      s_wl[warp][gg] = live ? l[gg] : 0.0f;
    }
#pragma unroll
    for (int e = 0; e < kVd; ++e) s_wacc[warp][gg][lane * kVd + e] = acc[gg][e];
  }
  __syncthreads();
  const int span = kWideSpan;
  // A warp takes kWarp consecutive outputs (one query head: D is a multiple
  // of the warp); its lane w < kWarps computes warp w's weight e^(m_w - M)
  // once into the warp's row of s_wt for all of them.
  __shared__ float s_wt[kWarps][kWarps];
  static_assert(kD % kWarp == 0 && kWarps <= kWarp, "wide merge: a warp's outputs share a head");
  for (int base = warp * kWarp; base < ng * D; base += kWideThreads) {
    const int idx = base + lane, gg = idx / D, d = idx % D, h = h0 + gg;
    float mx = neg_inf();
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_wm[w][gg]);
    if (lane < kWarps) {
      const float mw = s_wm[lane][gg];
      s_wt[warp][lane] = mw == neg_inf() ? 0.0f : expf(mw - mx);
    }
    warp_sync();
    float sum = 0.0f, a = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      if (s_wm[w][gg] == neg_inf()) continue;  // no visible key in warp w
      const float wt = s_wt[warp][w];
      sum = fmaf(s_wl[w][gg], wt, sum);
      a = fmaf(s_wacc[w][gg][d], wt, a);
    }
    warp_sync();  // s_wt is rewritten by the warp's next outputs
    if (p.splits == 1) {
      store(p.out + (static_cast<int64_t>(row) * heads + h) * D + d, round_to(a / sum, mode));
    } else {
      float* pt = p.partial + ((static_cast<int64_t>(b) * heads + h) * p.splits + split) * (D + 2);
      if (d == 0) {
        pt[0] = mx;
        pt[1] = sum;
      }
      pt[2 + d] = a;
    }
  }
  if (p.splits == 1) return;
  merge_splits(p, b, h0, ng, row, first, pos, span);
}

// ---- Host side: how a decode launch is cut ------------------------------------
inline bool is_decode(const PagedBatch& batch) {
  return batch.num_tokens == batch.num_seqs && batch.max_query_len == 1;
}

struct DecodePlan {
  int kG = 1;             // query heads per block (1, 2, 4 or 8)
  int head_chunks = 1;    // blocks per kv head
  int pages_per_split = 1;
  int splits = 1;
  bool wide = false;      // paged_decode_wide_block (else paged_decode_block)
};

inline DecodePlan decode_plan(const PagedBatch& batch, const AttentionSpec& spec) {
  DecodePlan p;
  const int64_t group = spec.heads / spec.kv_heads;
  p.kG = group <= 1 ? 1 : group <= 2 ? 2 : group <= 4 ? 4 : 8;
  p.head_chunks = static_cast<int>((group + p.kG - 1) / p.kG);
  const int64_t max_pages = std::max<int64_t>(1, (batch.max_seq_len + kPage - 1) / kPage);
  const int64_t base = std::max<int64_t>(1, batch.num_seqs * spec.kv_heads * p.head_chunks);
  const int64_t want = std::min(max_pages, std::max<int64_t>(1, (kDecodeTargetBlocks + base - 1) / base));
  p.pages_per_split = static_cast<int>((max_pages + want - 1) / want);
  p.splits = static_cast<int>((max_pages + p.pages_per_split - 1) / p.pages_per_split);
  return p;
}

// The wide kernel's cut: kWideSpan keys per split, up to kWideMaxHeads
// query heads per block.
inline DecodePlan decode_plan_wide(const PagedBatch& batch, const AttentionSpec& spec) {
  DecodePlan p;
  const int64_t group = spec.heads / spec.kv_heads;
  p.kG = group <= 1 ? 1 : group <= 2 ? 2 : kWideMaxHeads;
  p.head_chunks = static_cast<int>((group + p.kG - 1) / p.kG);
  p.pages_per_split = kWideSpan / kPage;
  const int64_t max_pages = std::max<int64_t>(1, (batch.max_seq_len + kPage - 1) / kPage);
  p.splits = static_cast<int>((max_pages + p.pages_per_split - 1) / p.pages_per_split);
  p.wide = true;
  return p;
}

// Scratch of a split decode. The merge counters come first, one per
// (sequence, block column) at b * heads + the column's first query head,
// whichever plan cut the launch; the partials (max, sum, acc[D] of every
// (sequence, head, split)) fill the end of the scratch. A scratch shared by
// launches of different shapes (a graph per batch size) therefore never has
// one launch's partials over another's counters as long as it holds the
// largest counter block plus the largest partials
// (paged_attention_shared_scratch_elems); the counters are zero between
// launches, the partials anything.
inline int64_t partial_elems(int64_t seqs, int64_t heads, int64_t D, const DecodePlan& p) {
  return p.splits > 1 ? seqs * heads * p.splits * (D + 2) : 0;
}
inline int64_t counter_elems(int64_t seqs, int64_t heads, const DecodePlan& p) {
  return p.splits > 1 ? seqs * heads : 0;
}

// The sliding window as the kernels take it (0: none).
inline int decode_window(const AttentionSpec& spec) {
  return spec.sliding_window ? static_cast<int>(std::min<int64_t>(*spec.sliding_window, INT_MAX)) : 0;
}

// A decode launch's arguments for q [tokens, heads * D] (or the q|k|v rows
// with a fused prologue) over `cache`; `scratch`: the split-K scratch of
// scratch_elems F32 values (counters first, partials at the end), or null
// with one split.
template <typename T>
DecodeParams<T> decode_params(const PagedBatch& batch, const AttentionSpec& spec, const DecodePlan& plan, const T* q,
                              const PagedKVLayer& cache, T* out, float* scratch, int64_t scratch_elems) {
  DecodeParams<T> p;
  p.q = q;
  p.kpool = static_cast<const T*>(cache.k.raw_data());
  p.vpool = static_cast<const T*>(cache.v.raw_data());
  p.out = out;
  const bool split = plan.splits > 1 && scratch;
  p.partial = split ? scratch + scratch_elems - partial_elems(batch.num_seqs, spec.heads, spec.head_dim, plan) : nullptr;
  p.counters = split ? reinterpret_cast<int*>(scratch) : nullptr;
  p.query_start = static_cast<const int32_t*>(batch.query_start.raw_data());
  p.seq_lens = static_cast<const int32_t*>(batch.seq_lens.raw_data());
  p.block_table = static_cast<const int32_t*>(batch.block_table.raw_data());
  p.table_stride = static_cast<int>(batch.block_table.size(1));
  p.heads = static_cast<int>(spec.heads);
  p.kv_heads = static_cast<int>(spec.kv_heads);
  p.group = static_cast<int>(spec.heads / spec.kv_heads);
  p.head_chunks = plan.head_chunks;
  p.D = static_cast<int>(spec.head_dim);
  p.scale = spec.scale;
  p.window = decode_window(spec);
  p.mode = round_mode(spec.dtype);
  p.pages_per_split = plan.pages_per_split;
  p.splits = plan.splits;
  return p;
}

// The q|k|v prologue's arguments: q/k norms (undefined without), the cache
// to write the new K/V into, RoPE.
inline DecodeQkv decode_qkv(const Tensor& q_norm, const Tensor& k_norm, PagedKVLayer& cache, const Tensor& inv_freq,
                            double eps, float attention_scaling, const AttentionSpec& spec) {
  DecodeQkv f;
  f.q_norm = q_norm.defined() ? q_norm.raw_data() : nullptr;
  f.k_norm = k_norm.defined() ? k_norm.raw_data() : nullptr;
  f.k_pool = cache.k.mutable_raw_data();
  f.v_pool = cache.v.mutable_raw_data();
  f.rope = qk_norm_rope_args(inv_freq, spec.head_dim, eps, attention_scaling, spec.dtype);
  return f;
}

// Calls f(kD, kVec, kLanes) (integral constants) with the decode tiling for
// head_dim D: 16-byte vectors for 64 and 128, pairs for any other even D <= 256.
template <typename T, typename F> void with_decode_shape(int D, F&& f) {
  constexpr int kV = 16 / static_cast<int>(sizeof(T));
  if (D == 64) f(std::integral_constant<int, 64>{}, std::integral_constant<int, kV>{}, std::integral_constant<int, 64 / kV>{});
  else if (D == 128)
    f(std::integral_constant<int, 128>{}, std::integral_constant<int, kV>{}, std::integral_constant<int, 128 / kV>{});
  else f(std::integral_constant<int, 256>{}, std::integral_constant<int, 2>{}, std::integral_constant<int, 32>{});
}


// The decode batches of paged_attention (paged_decode_gpu.cu).
void paged_attention_decode(const Tensor& q, const PagedBatch& batch, const PagedKVLayer& cache,
                            const AttentionSpec& spec, Tensor& out, Tensor* scratch);

}  // namespace hipformers::kernels::gpu
