// flash_attention_3's prefill on Hopper (sm_90+): the paged prefill with the
// K/V pages brought in by the Tensor Memory Accelerator instead of by every
// thread, and both products (Q K^T and P V) as warpgroup MMAs (wgmma) that
// read K and V where the copies left them. Built for CUDA only, as sm_90a
// machine code plus compute_90 PTX (CMakeLists.txt: wgmma exists only in
// sm_90a; the PTX, JIT-compiled on later GPUs, keeps TMA and takes the
// mma.sync products). Everywhere else, and on GPUs before sm_90,
// flash_attention_3 runs paged_prefill_mma_kernel (paged_attention_gpu.cu),
// which computes the same thing in the same order: the tests find the same
// bits.
//
// The pages come in by TMA into a ring of mbarrier-guarded slots, the
// FlashAttention-3 pipeline, but without its separate producer warp: a
// block is the kMmaWarps warps of paged_prefill_mma_kernel (128 query rows,
// two warpgroups of 64, the MmaPrefillWarp softmax, gpu/prefill_mma.h) and
// thread 0 issues the copies. (A ninth warp costs more than it gives: registers go to warps
// in groups of four, so 288 threads cap every thread at 168 registers, and
// ptxas spilled 280 bytes of the head_dim 128 math there.) The pools are seen as 2-D tensors
// [pages * kv_heads * 64 rows, head_dim] (one TMA descriptor each, encoded
// on the host per launch); a page of one kv head is 64 consecutive rows,
// copied as head_dim / 64 boxes of 64 rows x 128 bytes with the 128-byte
// swizzle (PageLayout::kSwizzle128: conflict-free ldmatrix without padding)
// into a ring of kTmaStages slots. Per slot two mbarriers:
//   full[s]:  1 arrival (thread 0's arrive.expect_tx with the page's
//             bytes) + the copies' bytes; every thread waits on it;
//   empty[s]: one arrival per warp when it is done with the slot; thread 0
//             waits on it before refilling the slot.
// Phase parity: slot s serves pages t = s, s + kTmaStages, ...; use
// u = t / kTmaStages waits full[s] for parity u & 1, and the refill after
// it waits empty[s] for parity u & 1. Whole pages are copied, so rows past
// seq_len hold whatever the pool has there (NaN in the tests): their scores
// are masked, and the block zeroes those V rows of the slot (then
// __syncthreads) before using it, since p = 0 times NaN is NaN. Up to
// kTmaStages - 1 pages are in flight while a page is computed, and the key
// loop has no block-wide barrier but that of a last partial page.
#include <cuda.h>  // CUtensorMap and its enums (the encoder is reached through the runtime)

#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>
#include <type_traits>

#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/prefill_mma.h"

namespace hipformers::kernels::gpu {
namespace {

constexpr int kTmaStages = 4;
constexpr int kTmaThreads = kMmaThreads;
constexpr int kBoxCols = 64;                   // 128 bytes of 16-bit elements

template <int kD> struct TmaLayout {
  static constexpr int kBoxes = kD / kBoxCols;                  // boxes per page (K or V)
  static constexpr uint32_t kBoxBytes = kPage * 128;
  static constexpr uint32_t kPageBytes = kBoxes * kBoxBytes;    // one K (or V) page
  static constexpr uint32_t kStageBytes = 2 * kPageBytes;       // K then V
  static constexpr uint32_t kBarrierOffset = kTmaStages * kStageBytes;
  // + the barriers, + 1024 to align the first slot (the swizzle's period).
  static constexpr size_t kBytes = kBarrierOffset + 2 * kTmaStages * sizeof(uint64_t) + 1024;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// The box at (col, row) of the tensor `map` into shared memory at dst,
// counted on `bar` when it lands.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int col, int row, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(bar)
      : "memory");
}

// Orders this thread's generic-proxy shared memory writes before later
// async-proxy (TMA) accesses of the same bytes.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // sm_90a: wgmma
// ---- Warpgroup MMA (wgmma) for S = Q K^T --------------------------------------
// A warpgroup (4 warps, 64 query rows) multiplies its Q (A, from registers:
// each warp's 16 rows in the mma.sync A fragments it already holds) by a K
// page straight from shared memory (B, through a matrix descriptor), 64 x 64
// per instruction and 16 dims per step, asynchronously; the f32 result
// lands in each warp in the m16n8 accumulator layout the softmax reads.
// The page is exactly wgmma's canonical K-major layout with the 128-byte
// swizzle: rows (keys) of 128 bytes, 8-row atoms 1024 bytes apart (the
// descriptor's stride byte offset), the 16-byte chunk c of row r at c ^ (r %
// 8), atoms 1024-byte aligned. A 16-dim step is 32 bytes into its 64-dim
// box; the hardware applies the swizzle to the resulting address.
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) | (uint64_t{1} << 16) |  // leading offset: unused (1)
         (uint64_t{1024 >> 4} << 32) |                                           // stride: 8 rows x 128 bytes
         (uint64_t{1} << 62);                                                    // 128-byte swizzle
}
// Keeps the compiler from moving accesses of r across the asynchronous MMA.
__device__ __forceinline__ void wgmma_fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

// d (+)= a b for N = 64 or 128 output columns: m64nNk16, f32 accumulators
// (N / 2 per thread: d[j][0..3] for the 8-column groups j), a: this warp's
// A fragment (registers), b: a shared-memory descriptor, K-major
// (kTransB = 0) or N-major (kTransB = 1). accumulate false: d = a b.
template <typename T, int N, int kTransB>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b, bool accumulate) {
  static_assert(N == 64 || N == 128, "the shapes the prefill uses");
#define HF_WGMMA_D(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define HF_WGMMA_64(TYPE, TRANS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n" \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
               "}, {%32, %33, %34, %35}, %36, p, 1, 1, " TRANS ";\n}\n" \
               : HF_WGMMA_D(0), HF_WGMMA_D(1), HF_WGMMA_D(2), HF_WGMMA_D(3), HF_WGMMA_D(4), HF_WGMMA_D(5), HF_WGMMA_D(6), \
                 HF_WGMMA_D(7) \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate ? 1 : 0))
#define HF_WGMMA_128(TYPE, TRANS) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {" \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
               "}, {%64, %65, %66, %67}, %68, p, 1, 1, " TRANS ";\n}\n" \
               : HF_WGMMA_D(0), HF_WGMMA_D(1), HF_WGMMA_D(2), HF_WGMMA_D(3), HF_WGMMA_D(4), HF_WGMMA_D(5), HF_WGMMA_D(6), \
                 HF_WGMMA_D(7), HF_WGMMA_D(8), HF_WGMMA_D(9), HF_WGMMA_D(10), HF_WGMMA_D(11), HF_WGMMA_D(12), HF_WGMMA_D(13), \
                 HF_WGMMA_D(14), HF_WGMMA_D(15) \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate ? 1 : 0))
  constexpr bool kBf16 = std::is_same_v<T, gpu_bf16>;
  if constexpr (N == 64 && kBf16 && kTransB == 0) HF_WGMMA_64("bf16", "0");
  else if constexpr (N == 64 && kBf16) HF_WGMMA_64("bf16", "1");
  else if constexpr (N == 64 && kTransB == 0) HF_WGMMA_64("f16", "0");
  else if constexpr (N == 64) HF_WGMMA_64("f16", "1");
  else if constexpr (kBf16 && kTransB == 0) HF_WGMMA_128("bf16", "0");
  else if constexpr (kBf16) HF_WGMMA_128("bf16", "1");
  else if constexpr (kTransB == 0) HF_WGMMA_128("f16", "0");
  else HF_WGMMA_128("f16", "1");
#undef HF_WGMMA_128
#undef HF_WGMMA_64
#undef HF_WGMMA_D
}

// S = Q K^T for the warpgroup's 64 rows and the 64 keys of a K page at sk
// (kSwizzle128 layout); every thread of the warpgroup must call it.
template <typename T, int kD>
__device__ __forceinline__ void wgmma_scores(float (&s)[kPage / 8][4], const uint32_t (&qa)[kD / 16][4], uint32_t sk) {
#pragma unroll
  for (int j = 0; j < kPage / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) wgmma_fence_operand(s[j][e]);
  wgmma_fence();  // the A registers (and the accumulators) as the MMAs will read them
#pragma unroll
  for (int k = 0; k < kD / 16; ++k)
    wgmma_rs<T, kPage, 0>(s, qa[k], wgmma_desc_sw128(sk + (k / 4) * (kPage * 128) + (k % 4) * 32), k > 0);
  wgmma_commit();
  wgmma_wait_all();
#pragma unroll
  for (int j = 0; j < kPage / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) wgmma_fence_operand(s[j][e]);
}

// O += round(P) V for the warpgroup's 64 rows: P from each warp's registers
// (A fragments of 16 keys per step), V straight from shared memory as B,
// N-major (a V row holds the dims of one key). The V page is wgmma's
// canonical MN-major layout with the 128-byte swizzle: 64 dims (128 bytes)
// per row, 8-key atoms 1024 bytes apart (the stride byte offset), the next
// 64 dims in the page's next box (the leading byte offset); a 16-key step
// starts 2048 bytes further. A warp that sees no key of the page passes
// P = 0, which leaves its O as it was.
__device__ __forceinline__ uint64_t wgmma_desc_sw128_mn(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) | (uint64_t{(kPage * 128) >> 4} << 16) |  // next 64 dims
         (uint64_t{1024 >> 4} << 32) |                                                          // next 8 keys
         (uint64_t{1} << 62);
}
template <typename T, int kD, typename Warp>
__device__ __forceinline__ void wgmma_pv(Warp& w, const float (&s)[kPage / 8][4], bool sees_page, uint32_t sv) {
  uint32_t pa[kPage / 16][4];
#pragma unroll
  for (int k = 0; k < kPage / 16; ++k) {
    if (sees_page) Warp::p_fragment(s, k, pa[k]);
    else pa[k][0] = pa[k][1] = pa[k][2] = pa[k][3] = 0u;
  }
#pragma unroll
  for (int j = 0; j < kD / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) wgmma_fence_operand(w.o[j][e]);
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < kPage / 16; ++k) wgmma_rs<T, kD, 1>(w.o, pa[k], wgmma_desc_sw128_mn(sv + k * 16 * 128), true);
  wgmma_commit();
  wgmma_wait_all();
#pragma unroll
  for (int j = 0; j < kD / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) wgmma_fence_operand(w.o[j][e]);
}
#endif

template <typename T, int kD, bool kWgmmaPV>
__global__ void __launch_bounds__(kTmaThreads) paged_prefill_tma_kernel(
    const __grid_constant__ CUtensorMap kmap, const __grid_constant__ CUtensorMap vmap, const T* __restrict__ q,
    T* __restrict__ out, const int32_t* __restrict__ query_start, const int32_t* __restrict__ seq_lens,
    const int32_t* __restrict__ block_table, int table_stride, int heads, int kv_heads, int group, float scale,
    int window) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 900
  __trap();  // TMA and mbarrier transaction counts need sm_90
#else
  using TL = TmaLayout<kD>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  PrefillTile tile;
  if (!tile.init(blockIdx.x, blockIdx.y, static_cast<int>(gridDim.z) - 1 - static_cast<int>(blockIdx.z), query_start,
                 seq_lens, group, window))
    return;  // the whole block: before any barrier exists
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t pad = ((raw + 1023u) & ~1023u) - raw;
  unsigned char* smem = smem_raw + pad;
  const uint32_t s_base = raw + pad;
  const uint32_t full0 = s_base + TL::kBarrierOffset;
  const uint32_t empty0 = full0 + kTmaStages * 8;
  if (tid == 0) {
    for (int s = 0; s < kTmaStages; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, kMmaWarps);
    }
    // The initialised barriers, visible to the async proxy (the copies).
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  // Thread 0 is also the producer: it fills the first kTmaStages slots now
  // and slot t % kTmaStages again (page t + kTmaStages) once every warp has
  // released page t.
  const int32_t* table = block_table + static_cast<int64_t>(tile.b) * table_stride;
  auto issue = [&](int t) {
    const int s = t % kTmaStages;
    const uint32_t full = full0 + 8 * s;
    const int kt = tile.kt0 + t * kPage;
    const int row = (table[kt / kPage] * kv_heads + tile.g) * kPage;
    const uint32_t sk = s_base + s * TL::kStageBytes, sv = sk + TL::kPageBytes;
    mbar_arrive_expect_tx(full, TL::kStageBytes);
#pragma unroll
    for (int box = 0; box < TL::kBoxes; ++box) {
      tma_load_2d(sk + box * TL::kBoxBytes, &kmap, box * kBoxCols, row, full);
      tma_load_2d(sv + box * TL::kBoxBytes, &vmap, box * kBoxCols, row, full);
    }
  };
  if (tid == 0)
    for (int t = 0; t < min(kTmaStages, tile.ntiles); ++t) issue(t);

  MmaPrefillWarp<T, kD, PageLayout::kSwizzle128> w;
  w.init(q, tile, heads, scale, window, warp, lane);
  // Whether some row of this warp's warpgroup (64 rows) sees a key of a
  // page: the union of its warps' needs() (uniform in the warpgroup).
  [[maybe_unused]] const PrefillRowSpan warpgroup_rows = PrefillRowSpan::of(tile, (warp / 4) * 64, 64, window);
  for (int t = 0; t < tile.ntiles; ++t) {
    const int s = t % kTmaStages, use = t / kTmaStages;
    mbar_wait(full0 + 8 * s, use & 1);
    const int kt = tile.kt0 + t * kPage;
    const uint32_t sk = s_base + s * TL::kStageBytes, sv = sk + TL::kPageBytes;
    const int valid = tile.len - kt;  // block-uniform: every warp takes this branch or none
    if (valid < kPage) {  // V rows past seq_len -> 0 (each row's 128 bytes per box, whatever the swizzle)
      unsigned char* zv = smem + s * TL::kStageBytes + TL::kPageBytes;
      for (int i = tid; i < (kPage - valid) * TL::kBoxes * 8; i += kTmaThreads) {
        const int chunk = i % 8, box = i / 8 % TL::kBoxes, r = valid + i / (8 * TL::kBoxes);
        *reinterpret_cast<uint4*>(zv + box * TL::kBoxBytes + r * 128 + chunk * 16) = uint4{0, 0, 0, 0};
      }
      fence_proxy_async_shared();  // before the async proxy touches them: wgmma's reads, the next TMA refill
      __syncthreads();
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    // Q K^T by the warpgroup (all four warps, if any of them sees a key of
    // the page; a warp that sees none drops its scores), the rest per warp.
    if (warpgroup_rows.sees_page(kt)) {
      float sc[kPage / 8][4];
      wgmma_scores<T, kD>(sc, w.qa, sk);
      const bool sees_page = w.needs(kt);
      if constexpr (kWgmmaPV) {  // P V by the warpgroup too
        if (sees_page) w.softmax(sc, kt);
        wgmma_pv<T, kD>(w, sc, sees_page, sv);
      } else if (sees_page) {
        w.attend_scores(sc, sv, kt);
      }
    }
#else  // compute_90 PTX JIT-compiled for a later GPU: no wgmma
    if (w.needs(kt)) w.attend(sk, sv, kt);
#endif
    __syncwarp();  // every lane's ldmatrix of the slot is done
    if (lane == 0) mbar_arrive(empty0 + 8 * s);
    if (tid == 0 && t + kTmaStages < tile.ntiles) {
      mbar_wait(empty0 + 8 * s, use & 1);
      issue(t + kTmaStages);
    }
  }
  w.store(out, tile, heads);
#endif
}

// P V by wgmma too (the default), or by mma.sync after the wgmma scores:
// HIPFORMERS_FA3_PV=mma (for A/B measurements and to tell the two apart).
bool wgmma_pv_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("HIPFORMERS_FA3_PV");
    return !(v && std::string(v) == "mma");
  }();
  return on;
}

// Whether the current device has sm_90's TMA (queried once per device).
bool has_tma() {
  constexpr int kMaxDevices = 64;
  static std::once_flag once[kMaxDevices];
  static bool yes[kMaxDevices] = {};
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  auto query = [dev] {
    int major = 0;
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
    return major >= 9;
  };
  if (dev < 0 || dev >= kMaxDevices) return query();
  std::call_once(once[dev], [&] { yes[dev] = query(); });
  return yes[dev];
}

// cuTensorMapEncodeTiled, from the driver through the runtime (no -lcuda).
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status),
          "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    return status == cudaDriverEntryPointSuccess ? reinterpret_cast<EncodeTiled>(p) : nullptr;
  }();
  return fn;
}

// The pool as a 2-D tensor [rows, D] of 16-bit elements, boxes of 64 rows x
// 64 columns with the 128-byte swizzle. False when the driver refuses it.
template <typename T> bool pool_map(CUtensorMap& map, const T* pool, int64_t rows, int D) {
  const EncodeTiled encode = encode_tiled();
  if (!encode) return false;
  const CUtensorMapDataType type =
      std::is_same_v<T, gpu_bf16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(D), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(D) * sizeof(T)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kBoxCols), static_cast<cuuint32_t>(kPage)};
  const cuuint32_t elem_strides[2] = {1, 1};
  return encode(&map, type, 2, const_cast<T*>(pool), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <typename T, int kD>
bool launch(const PrefillLaunch& a, const T* q, const T* kp, const T* vp, int64_t pool_rows, T* out, gpuStream_t s) {
  CUtensorMap kmap, vmap;
  if (!pool_map(kmap, kp, pool_rows, kD) || !pool_map(vmap, vp, pool_rows, kD)) return false;
  constexpr auto bytes = static_cast<int>(TmaLayout<kD>::kBytes);
  const dim3 grid(static_cast<unsigned>(a.heads), static_cast<unsigned>(a.num_seqs),
                  static_cast<unsigned>((a.max_query_len + kMmaBQ - 1) / kMmaBQ));
  auto go = [&](auto pv_tag) {
    constexpr auto kernel = paged_prefill_tma_kernel<T, kD, decltype(pv_tag)::value>;
    allow_dynamic_smem<kernel, bytes>("cudaFuncSetAttribute(paged_prefill_tma_kernel)");
    kernel<<<grid, kTmaThreads, bytes, s>>>(kmap, vmap, q, out, a.query_start, a.seq_lens, a.block_table,
                                            a.table_stride, a.heads, a.kv_heads, a.group, a.scale, a.window);
  };
  if (wgmma_pv_enabled()) go(std::true_type{});
  else go(std::false_type{});
  check_launch("paged_attention (prefill, sm_90 TMA)");
  return true;
}

}  // namespace

template <typename T>
bool launch_prefill_tma(const PrefillLaunch& a, const T* q, const T* kp, const T* vp, int64_t pool_rows, T* out,
                        gpuStream_t s) {
  if constexpr (sizeof(T) != 2) {
    return false;
  } else {
    if ((a.D != 64 && a.D != 128) || !has_tma()) return false;
    if (pool_rows <= 0 || pool_rows > INT32_MAX) return false;  // TMA coordinates are 32-bit
    // TMA needs 16-byte aligned bases (row strides of head_dim * 2 bytes are multiples of 16).
    if ((reinterpret_cast<uintptr_t>(kp) | reinterpret_cast<uintptr_t>(vp)) % 16 != 0) return false;
    return a.D == 64 ? launch<T, 64>(a, q, kp, vp, pool_rows, out, s) : launch<T, 128>(a, q, kp, vp, pool_rows, out, s);
  }
}

template bool launch_prefill_tma<float>(const PrefillLaunch&, const float*, const float*, const float*, int64_t,
                                        float*, gpuStream_t);
template bool launch_prefill_tma<gpu_bf16>(const PrefillLaunch&, const gpu_bf16*, const gpu_bf16*, const gpu_bf16*,
                                           int64_t, gpu_bf16*, gpuStream_t);
template bool launch_prefill_tma<gpu_half>(const PrefillLaunch&, const gpu_half*, const gpu_half*, const gpu_half*,
                                           int64_t, gpu_half*, gpuStream_t);

}  // namespace hipformers::kernels::gpu
