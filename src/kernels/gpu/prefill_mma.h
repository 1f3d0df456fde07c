// The warp-level math of the tensor-core prefill attention (CUDA only: PTX
// mma.sync / ldmatrix / cp.async), shared by the two kernels that feed it
// K/V pages in different ways: paged_prefill_mma_kernel (cp.async, double
// buffered; paged_attention_gpu.cu, sm_80+) and paged_prefill_tma_kernel
// (Hopper TMA tensor copies into an mbarrier ring; paged_prefill_sm90_gpu.cu).
// paged_attention_gpu.cu's header comment describes the tiling, the
// fragments and the rounding.
//
// MmaPrefillWarp is one warp's 16 query rows: Q in A fragments, the output
// accumulators and the running max / sum. attend() takes one page (64 keys)
// of K and V, already in shared memory in one of two layouts:
//   kPadded:    row-major, row stride MmaLayout::kLd = head_dim + 8 elements
//               (what cp.async fills; ldmatrix rows fall in distinct banks);
//   kSwizzle128: what a TMA tensor copy with CU_TENSOR_MAP_SWIZZLE_128B
//               writes for boxes of 64 rows x 128 bytes: head_dim / 64 such
//               boxes (dims 0-63, 64-127), each row 128 bytes, and the
//               16-byte chunk c of row r stored at chunk c ^ (r % 8), which
//               spreads ldmatrix rows over the banks without padding. Box
//               bases are 1024-byte aligned.
#pragma once

#if defined(HIPFORMERS_WITH_CUDA)

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <type_traits>

#include "gpu_types.h"
#include "paged_decode.h"

namespace hipformers::kernels::gpu {

constexpr int kMmaWarps = 8;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kMmaBQ = kMmaWarps * 16;

template <int kD> struct MmaLayout {
  static constexpr int kLd = kD + 8;                      // elements per smem row
  static constexpr int kTile = kPage * kLd;               // elements of one K (or V) page
  static constexpr int kStage = 2 * kTile;                // K then V
  static constexpr size_t kBytes = 2 * static_cast<size_t>(kStage) * 2;  // two stages of 16-bit elements
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared, bypassing L1; zeros when !valid (nothing read).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kN> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kN) : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// d += a b (16x8x16, f32 accumulate).
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, gpu_bf16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
__device__ __forceinline__ float fast_exp2(float x) {  // 2^x; 2^-inf = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// Two floats -> a b32 of two 16-bit values (lo in the low half), rounded to
// nearest even: the probabilities (cvt) and the output (the host's rounding).
template <typename T> __device__ __forceinline__ uint32_t pack_p(float lo, float hi) {
  if constexpr (std::is_same_v<T, gpu_bf16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}
template <typename T> __device__ __forceinline__ uint32_t pack_out(float lo, float hi) {
  if constexpr (std::is_same_v<T, gpu_bf16>) {
    return static_cast<uint32_t>(float_to_bf16_bits(lo)) | (static_cast<uint32_t>(float_to_bf16_bits(hi)) << 16);
  } else {
    return pack_p<T>(lo, hi);
  }
}

// What a block of the prefill takes: one (sequence b, head h) pair and the
// query tile `tile` (kMmaBQ rows) of that sequence's new tokens, and the
// keys it must walk: pages kt0, kt0 + kPage, ... (ntiles of them).
struct PrefillTile {
  int h, b, g;
  int64_t q_row0;  // first query row of the tile in q / out
  int nq;          // real query rows (<= kMmaBQ)
  int len;         // keys of the sequence (seq_lens[b])
  int pos0;        // position of the tile's first query
  int kt0, ntiles;
  // False when the tile holds no query (the block has nothing to do).
  __device__ __forceinline__ bool init(int head, int seq, int tile_index, const int32_t* query_start,
                                       const int32_t* seq_lens, int group, int window) {
    h = head;
    b = seq;
    g = h / group;
    const int q_begin = query_start[b], n = query_start[b + 1] - q_begin;
    const int q0 = tile_index * kMmaBQ;
    if (q0 >= n) return false;
    nq = min(kMmaBQ, n - q0);
    len = seq_lens[b];
    pos0 = len - n + q0;
    const int pos_last = pos0 + nq - 1;
    const int first0 = window > 0 ? max(0, pos0 - window + 1) : 0;
    kt0 = first0 / kPage * kPage;
    ntiles = (pos_last - kt0) / kPage + 1;
    q_row0 = static_cast<int64_t>(q_begin) + q0;
    return true;
  }
};

// Query rows [row0, row0 + rows) of a tile, as the keys they see: active
// when one of them is real, hi the last real row's position, lo the first
// key any of them sees. A warp's 16 rows (MmaPrefillWarp) and a warpgroup's
// 64 (the wgmma prefill) skip a page the same way.
struct PrefillRowSpan {
  bool active = false;
  int hi = 0, lo = 0;
  __device__ __forceinline__ static PrefillRowSpan of(const PrefillTile& t, int row0, int rows, int window) {
    PrefillRowSpan span;
    span.active = row0 < t.nq;
    span.hi = t.pos0 + min(row0 + rows - 1, t.nq - 1);
    span.lo = window > 0 ? max(0, t.pos0 + row0 - window + 1) : 0;
    return span;
  }
  // Whether a row sees a key of the page starting at key kt.
  __device__ __forceinline__ bool sees_page(int kt) const { return active && kt <= hi && kt + kPage - 1 >= lo; }
};

enum class PageLayout { kPadded, kSwizzle128 };

template <typename T, int kD, PageLayout kLayout = PageLayout::kPadded> struct MmaPrefillWarp {
  using L = MmaLayout<kD>;
  static constexpr uint32_t kBoxBytes = kPage * 128;  // kSwizzle128: one 64-dim box of a page
  static constexpr int kDK = kD / 16;  // 16-dim k-steps of Q K^T (and 16-dim pairs of output n-tiles)
  static constexpr int kNT = kPage / 8;  // 8-key n-tiles of S
  static constexpr int kDN = kD / 8;   // 8-dim n-tiles of O

  uint32_t qa[kDK][4];
  float o[kDN][4];
  float m[2], l[2];  // rows gid, gid + 8 (log2 domain)
  float scale_log2;
  int wr0, gid, tig, window;
  PrefillRowSpan span;  // the warp's 16 rows
  int qp_lo, warp_full;
  int qp_row[2];
  uint32_t k_off, v_off;  // kPadded: ldmatrix lane offsets (bytes within a page)
  int mi, mr;             // this lane's ldmatrix matrix and row

  // Q -> A fragments (rows past the tile are zeros and never stored).
  __device__ __forceinline__ void init(const T* q, const PrefillTile& t, int heads, float scale, int win, int warp,
                                       int lane) {
    wr0 = warp * 16;
    gid = lane / 4;
    tig = lane % 4;
    window = win;
    const int r_lo = wr0 + gid, r_hi = r_lo + 8;
    const T* q_lo = q + ((t.q_row0 + r_lo) * heads + t.h) * kD + 2 * tig;
    const T* q_hi = q + ((t.q_row0 + r_hi) * heads + t.h) * kD + 2 * tig;
#pragma unroll
    for (int k = 0; k < kDK; ++k) {
      qa[k][0] = r_lo < t.nq ? *reinterpret_cast<const uint32_t*>(q_lo + 16 * k) : 0u;
      qa[k][1] = r_hi < t.nq ? *reinterpret_cast<const uint32_t*>(q_hi + 16 * k) : 0u;
      qa[k][2] = r_lo < t.nq ? *reinterpret_cast<const uint32_t*>(q_lo + 16 * k + 8) : 0u;
      qa[k][3] = r_hi < t.nq ? *reinterpret_cast<const uint32_t*>(q_hi + 16 * k + 8) : 0u;
    }
#pragma unroll
    for (int j = 0; j < kDN; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    m[0] = m[1] = neg_inf();
    l[0] = l[1] = 0.0f;
    scale_log2 = scale * 1.4426950408889634f;
    span = PrefillRowSpan::of(t, wr0, 16, window);
    qp_lo = t.pos0 + wr0;                                 // the warp's first query position
    warp_full = window > 0 ? max(0, qp_lo + 15 - window + 1) : 0;  // keys >= this: seen by every row
    qp_row[0] = t.pos0 + wr0 + gid;
    qp_row[1] = qp_row[0] + 8;
    // lane -> matrix mi = lane / 8, row lane % 8.
    mi = lane / 8;
    mr = lane % 8;
    k_off = static_cast<uint32_t>((((mi >> 1) * 8 + mr) * L::kLd + (mi & 1) * 8) * 2);
    v_off = static_cast<uint32_t>((((mi & 1) * 8 + mr) * L::kLd + (mi >> 1) * 8) * 2);
  }

  // Byte offset within a page of the 16-byte chunk `chunk` (dims 8 chunk ..
  // 8 chunk + 7) of row `row`.
  __device__ __forceinline__ uint32_t offset(int row, int chunk) const {
    if constexpr (kLayout == PageLayout::kPadded) {
      return static_cast<uint32_t>((row * L::kLd + chunk * 8) * 2);
    } else {
      return static_cast<uint32_t>((chunk / 8) * kBoxBytes + row * 128 + (((chunk % 8) ^ (row % 8)) << 4));
    }
  }
  // ldmatrix addresses: S's B fragments of key rows 16 np.. (K, two 8-key
  // n-tiles) at 16-dim step k; O's B fragments of key step k (V, two 8-dim
  // n-tiles, transposed) at 16-dim pair dp.
  // (kPadded keeps the lane's part precomputed: through offset() ptxas
  // needs 8 more registers and spills at head_dim 64.)
  __device__ __forceinline__ uint32_t k_addr(uint32_t sk, int np, int k) const {
    if constexpr (kLayout == PageLayout::kPadded) return sk + k_off + static_cast<uint32_t>((np * 16 * L::kLd + k * 16) * 2);
    else return sk + offset(np * 16 + (mi >> 1) * 8 + mr, 2 * k + (mi & 1));
  }
  __device__ __forceinline__ uint32_t v_addr(uint32_t sv, int k, int dp) const {
    if constexpr (kLayout == PageLayout::kPadded) return sv + v_off + static_cast<uint32_t>((k * 16 * L::kLd + dp * 16) * 2);
    else return sv + offset(k * 16 + (mi & 1) * 8 + mr, 2 * dp + (mi >> 1));
  }

  // Whether the page at key kt holds a key some row of this warp sees.
  __device__ __forceinline__ bool needs(int kt) const { return span.sees_page(kt); }

  // The page at key kt: K at shared address sk, V at sv.
  __device__ __forceinline__ void attend(uint32_t sk, uint32_t sv, int kt) {
    float s[kNT][4];
    scores(s, sk);
    attend_scores(s, sv, kt);
  }

  // S = Q K^T (16 x 64 per warp) by mma.sync. s[j] holds keys 8j.. 8j + 7
  // in the m16n8 accumulator layout: [0], [1] row gid, keys 8j + 2 tig (+1);
  // [2], [3] row gid + 8 (what a warpgroup MMA leaves in a warp too).
  __device__ __forceinline__ void scores(float (&s)[kNT][4], uint32_t sk) const {
#pragma unroll
    for (int j = 0; j < kNT; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int k = 0; k < kDK; ++k)
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        uint32_t kb[4];
        ldmatrix_x4(kb, k_addr(sk, np, k));
        mma16816<T>(s[2 * np], qa[k], kb[0], kb[1]);
        mma16816<T>(s[2 * np + 1], qa[k], kb[2], kb[3]);
      }
  }

  // The rest of a page once S is known: online softmax, O += round(P) V.
  __device__ __forceinline__ void attend_scores(float (&s)[kNT][4], uint32_t sv, int kt) {
    softmax(s, kt);
    pv(s, sv);
  }

  // Online softmax of the page's scores: m, l and O rescaled, P left in s.
  __device__ __forceinline__ void softmax(float (&s)[kNT][4], int kt) {
    const bool need_mask = kt + kPage - 1 > qp_lo || kt < warp_full;
    float corr[2];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int qp = qp_row[rr];
      const int fq = window > 0 ? max(0, qp - window + 1) : 0;
      float mx = m[rr];
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float v = s[j][2 * rr + e] * scale_log2;
          if (need_mask) {
            const int kp = kt + 8 * j + 2 * tig + e;
            if (kp > qp || kp < fq) v = neg_inf();
          }
          s[j][2 * rr + e] = v;
          mx = fmaxf(mx, v);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float ref = mx == neg_inf() ? 0.0f : mx;  // nothing visible yet: every p is 0
      corr[rr] = fast_exp2(m[rr] - ref);
      m[rr] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = fast_exp2(s[j][2 * rr + e] - ref);
          sum += p;
          s[j][2 * rr + e] = p;
        }
      l[rr] = l[rr] * corr[rr] + sum;
    }
#pragma unroll
    for (int j = 0; j < kDN; ++j) {
      o[j][0] *= corr[0];
      o[j][1] *= corr[0];
      o[j][2] *= corr[1];
      o[j][3] *= corr[1];
    }
  }

  // P of keys 16 k.. 16 k + 15 as an A fragment (rounded to T).
  __device__ __forceinline__ static void p_fragment(const float (&s)[kNT][4], int k, uint32_t (&pa)[4]) {
    pa[0] = pack_p<T>(s[2 * k][0], s[2 * k][1]);
    pa[1] = pack_p<T>(s[2 * k][2], s[2 * k][3]);
    pa[2] = pack_p<T>(s[2 * k + 1][0], s[2 * k + 1][1]);
    pa[3] = pack_p<T>(s[2 * k + 1][2], s[2 * k + 1][3]);
  }

  // O += round(P) V by mma.sync, P straight from the S accumulators.
  __device__ __forceinline__ void pv(const float (&s)[kNT][4], uint32_t sv) {
#pragma unroll
    for (int k = 0; k < kPage / 16; ++k) {
      uint32_t pa[4];
      p_fragment(s, k, pa);
#pragma unroll
      for (int dp = 0; dp < kD / 16; ++dp) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, v_addr(sv, k, dp));
        mma16816<T>(o[2 * dp], pa, vb[0], vb[1]);
        mma16816<T>(o[2 * dp + 1], pa, vb[2], vb[3]);
      }
    }
  }

  // out = round(O / l) for the warp's real rows.
  __device__ __forceinline__ void store(T* out, const PrefillTile& t, int heads) {
    if (!span.active) return;
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
      l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
    }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int r = wr0 + gid + 8 * rr;
      if (r >= t.nq) continue;
      T* y = out + ((t.q_row0 + r) * heads + t.h) * kD + 2 * tig;
#pragma unroll
      for (int j = 0; j < kDN; ++j)
        *reinterpret_cast<uint32_t*>(y + 8 * j) = pack_out<T>(o[j][2 * rr] / l[rr], o[j][2 * rr + 1] / l[rr]);
    }
  }
};

// Opts a kernel into kBytes of dynamic shared memory (beyond the default
// 48 KB), once per instantiation and device (cudaFuncSetAttribute is per
// device).
template <auto kKernel, int kBytes> void allow_dynamic_smem(const char* what) {
  constexpr int kMaxDevices = 64;
  static std::once_flag once[kMaxDevices];
  auto set = [&] { check(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes), what); };
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev >= 0 && dev < kMaxDevices) std::call_once(once[dev], set);
  else set();
}

// What launch_prefill_tma needs of the batch and the attention.
struct PrefillLaunch {
  const int32_t* query_start;
  const int32_t* seq_lens;
  const int32_t* block_table;
  int table_stride, heads, kv_heads, group, D, window;
  float scale;
  int num_seqs, max_query_len;
};
// Launches the Hopper prefill (paged_prefill_sm90_gpu.cu) for 16-bit T and
// head_dim 64 or 128 on an sm_90+ device; false (nothing launched) elsewhere,
// and the caller runs the mma.sync kernel. pool_rows: rows of head_dim
// elements in each pool (pages * kv_heads * kPage).
template <typename T>
bool launch_prefill_tma(const PrefillLaunch& a, const T* q, const T* kp, const T* vp, int64_t pool_rows, T* out,
                        gpuStream_t s);

}  // namespace hipformers::kernels::gpu

#endif  // HIPFORMERS_WITH_CUDA
