// y[rows, out] = x[rows, in] W[out, in]^T (+ b), fp32 accumulation, one
// rounding to the storage/emulated dtype after the bias add (as cpu::linear).
// rows <= kGemvMaxRows (decode): the GEMV kernel below, which streams W once
// at memory bandwidth (CUDA and HIP). Larger rows on CUDA: cuBLASLt with
// CUBLAS_COMPUTE_32F (true fp32, never TF32: the fp32 parity bar is 1e-3
// relative) and the bias fused in its epilogue, so the bias is added before
// the single rounding; its descriptors and algorithm are cached per shape
// (plan cache below). HIP (and any shape cuBLASLt has no algorithm for): the
// tiled kernel below.
//
// Graph capture: every path only enqueues kernels. The first cuBLASLt call on
// a device creates its handle and workspace (cudaMalloc), which a capturing
// stream refuses, so run one eager linear with rows > kGemvMaxRows on each
// device before capturing (a warm-up step does). A plan miss itself is host
// work only, but an eager call per shape before capture keeps the heuristic
// query out of the captured step as well.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/launch.h"
#include "gpu/vec16.h"

#if defined(HIPFORMERS_WITH_CUBLASLT)
#include <cublasLt.h>
#endif

namespace hipformers::kernels::gpu {
namespace {

// 64x64 output tile per 256-thread block, 4x4 outputs per thread, K in
// steps of 16 through shared memory. Both operands are K-contiguous (x rows
// and W rows), so tiles are loaded along K and stored transposed.
constexpr int kTileM = 64, kTileN = 64, kTileK = 16;

template <typename T>
__global__ void __launch_bounds__(256) tiled_linear_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                           const T* __restrict__ bias, T* __restrict__ y,
                                                           int64_t rows, int64_t out_f, int64_t in_f, int mode) {
  __shared__ float xs[kTileK][kTileM + 4];
  __shared__ float ws[kTileK][kTileN + 4];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTileM, col0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < in_f; k0 += kTileK) {
    // 64 x 16 elements per operand, 4 per thread.
    for (int e = tid; e < kTileM * kTileK; e += 256) {
      const int r = e / kTileK, k = e % kTileK;
      const int64_t gr = row0 + r, gc = col0 + r, gk = k0 + k;
      xs[k][r] = (gr < rows && gk < in_f) ? load(x + gr * in_f + gk) : 0.0f;
      ws[k][r] = (gc < out_f && gk < in_f) ? load(w + gc * in_f + gk) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTileK; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = xs[k][ty + 16 * i];
        b[i] = ws[k][tx + 16 * i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = row0 + ty + 16 * i;
    if (r >= rows) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = col0 + tx + 16 * j;
      if (c >= out_f) continue;
      float v = acc[i][j];
      if (bias) v += load(bias + c);
      store(y + r * out_f + c, round_to(v, mode));
    }
  }
}

#if defined(HIPFORMERS_WITH_CUBLASLT)
// Rounds y in place to the emulated dtype (only when it is narrower than the
// storage, e.g. F32 tensors emulating bf16). Only the cuBLASLt path needs it:
// the tiled kernel rounds as it stores.
__global__ void round_kernel(float* y, int64_t n, int mode) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = round_to(y[i], mode);
}
#endif

// ---- GEMV: rows <= kGemvMaxRows ------------------------------------------
//
// Layout. A warp owns kGemvFeatures (R = 4) weight rows; its lanes split the
// in dimension in 16-byte vectors of W (8 bf16/f16 or 4 f32 values), lane l
// taking vectors l, l + S*warp, ... A block is 256 threads; with split S > 1
// the S warps of a group split K further (vectors s*warp + l, ...) and their
// sums meet in shared memory. S grows (1, 2, 4, 8) while the grid has fewer
// than ~24 warps per SM and every lane keeps at least one vector, so small
// out (1024) still fills the GPU. x rows (at most 8) are read as vectors
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

// v as the storage type holds it after round_to(mode) and store().
template <typename T> __device__ __forceinline__ float stored(float v, int mode) {
  T t;
  store(&t, round_to(v, mode));
  return load(&t);
}

// y[r, c] = v (+ bias), then the residual update.
template <typename T>
__device__ __forceinline__ void gemv_store(T* y, float v, int r, int64_t c, int64_t out_f, int mode, T* residual) {
  T* out = y + r * out_f + c;
  store(out, round_to(v, mode));
  if (residual) {  // add_rms_norm's residual update: round(y as stored + residual)
    T* res = residual + r * out_f + c;
    store(res, round_to(load(out) + load(res), mode));
  }
}

// What the GEMV folds into its input and output (fused_linear, linear.h).
enum GemvInput : int { kInputPlain = 0, kInputNorm = 1 };
enum GemvOutput : int { kOutputPlain = 0, kOutputSwiGLU = 1 };

struct GemvFusion {
  const void* norm_w = nullptr;  // kInputNorm
  float eps = 0;
  void* residual = nullptr;      // residual = round(residual + y) after y is stored
};

// rms_norm(x) * norm_w for the block's rows into shared memory (rows * in
// values of T, rounded exactly as the rms_norm kernel stores them).
template <typename T>
__device__ __forceinline__ void gemv_norm_input(const T* __restrict__ x, T* xs, int rows, int64_t in_f,
                                                const GemvFusion& fusion, int mode) {
  __shared__ float scratch[kMaxWarps];
  const T* nw = static_cast<const T*>(fusion.norm_w);
  for (int r = 0; r < rows; ++r) {
    const T* xr = x + static_cast<int64_t>(r) * in_f;
    float sum = 0;
    for (int64_t i = threadIdx.x; i < in_f; i += blockDim.x) {
      const float v = load(xr + i);
      sum += v * v;
    }
    sum = block_sum(sum, scratch);
    const float inv = 1.0f / sqrtf(sum / static_cast<float>(in_f) + fusion.eps);
    for (int64_t i = threadIdx.x; i < in_f; i += blockDim.x)
      store(xs + r * in_f + i, round_to(load(nw + i) * round_to(load(xr + i) * inv, mode), mode));
  }
  __syncthreads();
}

// out_f: output features (for kOutputSwiGLU, half the weight's rows).
template <typename T, int ROWS, bool kVec, int kInput, int kOutput>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                            const T* __restrict__ bias, T* __restrict__ y, int rows,
                                                            int64_t out_f, int64_t in_f, int split, int mode,
                                                            GemvFusion fusion) {
  using IO = GemvIO<T, kVec>;
  using Raw = typename IO::Raw;
  constexpr int R = kGemvFeatures, V = IO::V, N = ROWS * R;
  constexpr int U = ROWS <= 2 ? 2 : 1;  // vectors per feature in flight per lane
  constexpr bool kSwiGLU = kOutput == kOutputSwiGLU;
  static_assert(N <= kWarp, "one sum per lane after the butterfly");
  __shared__ float partial[kGemvThreads / kWarp][N];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int groups = (kGemvThreads / kWarp) / split;  // feature groups per block
  const int64_t group = static_cast<int64_t>(blockIdx.x) * groups + warp / split;
  const int s = warp % split;
  const T* wrow[R];
#pragma unroll
  for (int f = 0; f < R; ++f) {
    int64_t wr;
    if constexpr (kSwiGLU) {
      const int64_t c = group * 2 + f % 2 < out_f ? group * 2 + f % 2 : out_f - 1;
      wr = f < 2 ? c : out_f + c;
    } else {
      wr = group * R + f < out_f ? group * R + f : out_f - 1;
    }
    wrow[f] = w + wr * in_f;
  }
  const int64_t nv = in_f / V, step = static_cast<int64_t>(split) * kWarp, chunk = step * U;
  const int64_t j0 = static_cast<int64_t>(s) * kWarp + lane;
  auto load_chunk = [&](Raw (&wv)[U][R], int64_t j) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int f = 0; f < R; ++f) wv[u][f] = j + u * step < nv ? IO::load_w(wrow[f] + (j + u * step) * V) : Raw{};
  };
  // Weights depend on no earlier kernel: the first chunk into registers, the
  // rest of the slice into L2 (one prefetch per 128-byte line), then let the
  // next kernel be scheduled, and only then wait for the input.
  Raw wv[U][R];
  load_chunk(wv, j0);
  for (int64_t j = j0 + chunk; j < nv; j += step)
    if ((j * V * static_cast<int64_t>(sizeof(T))) % 128 < static_cast<int64_t>(V * sizeof(T)))
#pragma unroll
      for (int f = 0; f < R; ++f) prefetch_l2(wrow[f] + j * V);
  allow_dependents();
  grid_dependency_wait();  // launched dependent (gpu/launch.h)
  const T* xbase = x;
  if constexpr (kInput == kInputNorm) {
    extern __shared__ uint4 fused_x[];
    T* xs = reinterpret_cast<T*>(fused_x);
    gemv_norm_input<T>(x, xs, rows, in_f, fusion, mode);
    xbase = xs;
  }
  const T* xrow[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) xrow[r] = xbase + static_cast<int64_t>(r < rows ? r : rows - 1) * in_f;
  float acc[N];
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = 0.0f;
  for (int64_t j = j0; j < nv; j += chunk) {
    Raw cur[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int f = 0; f < R; ++f) cur[u][f] = wv[u][f];
    if (j + chunk < nv) load_chunk(wv, j + chunk);  // in flight while this chunk is used
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
  T* residual = static_cast<T*>(fusion.residual);
  if (!kSwiGLU && split == 1) {
    const int r = idx / R;
    const int64_t c = group * R + idx % R;
    if (holder && r < rows && c < out_f) gemv_store(y, acc[0] + (bias ? load(bias + c) : 0.0f), r, c, out_f, mode,
                                                    residual);
    return;
  }
  if (holder) partial[warp][idx] = acc[0];
  __syncthreads();
  // One thread per (group, row, output feature) of the block adds the splits.
  constexpr int kOuts = kSwiGLU ? 2 : R;  // output features per group
  const int tid = static_cast<int>(threadIdx.x);
  if (tid >= groups * ROWS * kOuts) return;
  const int g = tid / (ROWS * kOuts), r = tid / kOuts % ROWS, o = tid % kOuts;
  if (r >= rows) return;
  auto sum_splits = [&](int i) {
    float v = partial[g * split][i];
    for (int q = 1; q < split; ++q) v += partial[g * split + q][i];
    return v;
  };
  const int64_t grp = static_cast<int64_t>(blockIdx.x) * groups + g;
  if constexpr (kSwiGLU) {
    const int64_t c = grp * 2 + o;
    if (c >= out_f) return;
    // The projections as the unfused GEMV would have stored them.
    const float gate = stored<T>(sum_splits(r * R + o) + (bias ? load(bias + c) : 0.0f), mode);
    const float up = stored<T>(sum_splits(r * R + 2 + o) + (bias ? load(bias + out_f + c) : 0.0f), mode);
    const float silu = gate / (1.0f + expf(-gate));
    gemv_store(y, round_to(silu, mode) * up, r, c, out_f, mode, residual);
  } else {
    const int64_t c = grp * R + o;
    if (c >= out_f) return;
    gemv_store(y, sum_splits(r * R + o) + (bias ? load(bias + c) : 0.0f), r, c, out_f, mode, residual);
  }
}

// SM count and warp width per device (cached; attribute queries are host-only).
struct GemvDeviceInfo {
  int sms = 0, warp = 0;
};
GemvDeviceInfo gemv_device_info(int device) {
  static std::mutex mutex;
  static std::map<int, GemvDeviceInfo> infos;
  std::lock_guard<std::mutex> lock(mutex);
  GemvDeviceInfo& info = infos[device];
  if (info.sms == 0) {
    gpuDeviceProp_t prop{};
    check(gpuGetDeviceProperties(&prop, device), "gpuGetDeviceProperties");
    info.sms = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    info.warp = prop.warpSize > 0 ? prop.warpSize : 32;
  }
  return info;
}

// Shared memory a normalised input needs (0 for a plain one).
std::size_t gemv_fused_bytes(int input, int64_t rows, int64_t in_f, DType storage) {
  return input == kInputPlain ? 0 : static_cast<std::size_t>(rows * in_f) * dtype_size(storage);
}
constexpr std::size_t kGemvMaxFusedBytes = 40 << 10;  // under the 48 KiB every GPU gives without opting in

void gemv_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y, int64_t rows,
                 gpuStream_t s, int input = kInputPlain, int output = kOutputPlain, const GemvFusion& fusion = {}) {
  const int64_t in_f = weight.size(1);
  const int64_t out_f = output == kOutputSwiGLU ? weight.size(0) / 2 : weight.size(0);
  const GemvDeviceInfo info = gemv_device_info(x.device().index);
  const int warps = kGemvThreads / info.warp;
  const int64_t per_group = output == kOutputSwiGLU ? 2 : kGemvFeatures;  // output features per warp group
  const int64_t groups = (out_f + per_group - 1) / per_group;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const bool vec = in_f % kVec16<T> == 0 && aligned16(weight.raw_data()) &&
                     (input != kInputPlain || aligned16(x.raw_data()));
    const int64_t nv = vec ? in_f / kVec16<T> : in_f;
    int split = 1;
    while (split < warps && groups * split < static_cast<int64_t>(info.sms) * 24 &&
           nv >= static_cast<int64_t>(split) * 2 * info.warp)
      split *= 2;
    const int64_t per_block = warps / split;
    const auto blocks = static_cast<unsigned>((groups + per_block - 1) / per_block);
    const T* xp = static_cast<const T*>(x.raw_data());
    const T* wp = static_cast<const T*>(weight.raw_data());
    const T* bp = bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr;
    T* yp = static_cast<T*>(y.mutable_raw_data());
    const int mode = round_mode(dtype);
    const std::size_t shared = gemv_fused_bytes(input, rows, in_f, x.dtype());
    auto launch = [&](auto rows_tag, auto vec_tag) {
      constexpr int kRows = decltype(rows_tag)::value;
      constexpr bool kV = decltype(vec_tag)::value;
      auto go = [&](auto kernel) {
        launch_dependent(kernel, dim3(blocks), dim3(kGemvThreads), shared, s, xp, wp, bp, yp, static_cast<int>(rows),
                         out_f, in_f, split, mode, fusion);
      };
      if (output == kOutputSwiGLU) {
        if (input == kInputNorm) go(gemv_kernel<T, kRows, kV, kInputNorm, kOutputSwiGLU>);
        else go(gemv_kernel<T, kRows, kV, kInputPlain, kOutputSwiGLU>);
      } else {
        if (input == kInputNorm) go(gemv_kernel<T, kRows, kV, kInputNorm, kOutputPlain>);
        else go(gemv_kernel<T, kRows, kV, kInputPlain, kOutputPlain>);
      }
    };
    auto by_rows = [&](auto vec_tag) {
      if (rows == 1) launch(std::integral_constant<int, 1>{}, vec_tag);
      else if (rows == 2) launch(std::integral_constant<int, 2>{}, vec_tag);
      else if (rows <= 4) launch(std::integral_constant<int, 4>{}, vec_tag);
      else launch(std::integral_constant<int, 8>{}, vec_tag);
    };
    if (vec) by_rows(std::true_type{});
    else by_rows(std::false_type{});
  });
  check_launch("gemv_linear");
}
static_assert(kGemvMaxRows <= 8, "gemv_kernel instantiates row buckets up to 8");

void tiled_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y, int64_t rows,
                  gpuStream_t s) {
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  dim3 grid(static_cast<unsigned>((out_f + kTileN - 1) / kTileN), static_cast<unsigned>((rows + kTileM - 1) / kTileM));
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    tiled_linear_kernel<T><<<grid, 256, 0, s>>>(
        static_cast<const T*>(x.raw_data()), static_cast<const T*>(weight.raw_data()),
        bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr, static_cast<T*>(y.mutable_raw_data()),
        rows, out_f, in_f, round_mode(dtype));
  });
  check_launch("tiled_linear");
}

#if defined(HIPFORMERS_WITH_CUBLASLT)

void check_blas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw_error(ErrorKind::kRuntime, std::string(what) + " failed: cublasLt status " + std::to_string(status));
}

// One handle and one workspace per device, made on first use.
struct LtContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 32u << 20;
};

LtContext& lt_context(int device) {
  static std::mutex mutex;
  static auto* contexts = new std::map<int, LtContext>();  // never destroyed (process lifetime)
  std::lock_guard<std::mutex> lock(mutex);
  LtContext& c = (*contexts)[device];
  if (!c.handle) {
    stream_for(device);
    // The context counts as made only when both exist, so a failure (out of
    // memory, or a first use inside a graph capture) is retried next time.
    void* workspace = nullptr;
    check(cudaMalloc(&workspace, c.workspace_bytes), "cudaMalloc(cublasLt workspace)");
    cublasLtHandle_t handle = nullptr;
    const cublasStatus_t made = cublasLtCreate(&handle);
    if (made != CUBLAS_STATUS_SUCCESS) (void)cudaFree(workspace);
    check_blas(made, "cublasLtCreate");
    c.workspace = workspace;
    c.handle = handle;
  }
  return c;
}

// A cached matmul for one (device, rows, out, in, dtype, bias or not,
// operand alignments): descriptors, layouts and the heuristic's algorithm
// (or the finding that there is none). Only the bias pointer changes per
// call; it is set and the matmul enqueued under the plan's mutex, so threads
// sharing a plan do not race on the descriptor.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
  std::mutex mutex;
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {  // only a plan whose construction threw is ever destroyed
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};
using LtPlanKey = std::tuple<int, int64_t, int64_t, int64_t, int, bool, uint32_t, uint32_t, uint32_t>;

// cuBLASLt assumes 256-byte-aligned operands unless told otherwise; views
// such as the last row of a [T, hidden] tensor can be less aligned.
uint32_t lt_alignment(const void* p) {
  uint32_t a = 256;
  while (a > 1 && reinterpret_cast<std::uintptr_t>(p) % a) a /= 2;
  return a;
}

void build_plan(LtPlan& plan, const LtContext& ctx, cudaDataType_t type, int64_t rows, int64_t out_f, int64_t in_f,
                const void* bias_ptr, uint32_t align_a, uint32_t align_b, uint32_t align_c) {
  // Column-major view: y^T[out, rows] = op(W)[out, in] * x^T[in, rows], with W
  // stored as [in, out] column-major (ld in) and transposed.
  check_blas(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
  check_blas(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)), "TRANSA");
  check_blas(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)),
             "TRANSB");
  if (bias_ptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    check_blas(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
               "EPILOGUE");
    check_blas(
        cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)),
        "BIAS_POINTER");
    check_blas(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)),
               "BIAS_DATA_TYPE");
  }
  check_blas(cublasLtMatrixLayoutCreate(&plan.a, type, in_f, out_f, in_f), "layout A");
  check_blas(cublasLtMatrixLayoutCreate(&plan.b, type, in_f, rows, in_f), "layout B");
  check_blas(cublasLtMatrixLayoutCreate(&plan.c, type, out_f, rows, out_f), "layout C");
  cublasLtMatmulPreference_t pref = nullptr;
  check_blas(cublasLtMatmulPreferenceCreate(&pref), "preference");
  struct PrefCleanup {
    cublasLtMatmulPreference_t& pref;
    ~PrefCleanup() { cublasLtMatmulPreferenceDestroy(pref); }
  } cleanup{pref};
  check_blas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ctx.workspace_bytes, sizeof(ctx.workspace_bytes)),
             "workspace preference");
  check_blas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                  sizeof(align_a)), "alignment A");
  check_blas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                  sizeof(align_b)), "alignment B");
  check_blas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                                  sizeof(align_c)), "alignment C");
  check_blas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                                  sizeof(align_c)), "alignment D");
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  plan.ok = cublasLtMatmulAlgoGetHeuristic(ctx.handle, plan.op, plan.a, plan.b, plan.c, plan.c, pref, 1, &heuristic,
                                           &found) == CUBLAS_STATUS_SUCCESS &&
            found > 0;
  if (plan.ok) plan.algo = heuristic.algo;
}

// The plan for this call, built on first use. Plans live as long as the
// process (like the handles), so a captured graph never outlives them.
LtPlan& lt_plan(const LtContext& ctx, int device, cudaDataType_t type, int64_t rows, int64_t out_f, int64_t in_f,
                const void* bias_ptr, uint32_t align_a, uint32_t align_b, uint32_t align_c) {
  static std::mutex mutex;
  static auto* plans = new std::map<LtPlanKey, std::unique_ptr<LtPlan>>();  // never destroyed
  const LtPlanKey key{device, rows, out_f, in_f, static_cast<int>(type), bias_ptr != nullptr, align_a, align_b,
                      align_c};
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<LtPlan>& slot = (*plans)[key];
  if (!slot) {
    auto plan = std::make_unique<LtPlan>();
    build_plan(*plan, ctx, type, rows, out_f, in_f, bias_ptr, align_a, align_b, align_c);
    slot = std::move(plan);  // only complete plans enter the cache (a throw leaves none)
  }
  return *slot;
}

// Returns false when cuBLASLt offers no algorithm (the caller falls back).
bool cublaslt_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& y, int64_t rows,
                     gpuStream_t s) {
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  const cudaDataType_t type = x.dtype() == DType::kBF16 ? CUDA_R_16BF : x.dtype() == DType::kF16 ? CUDA_R_16F : CUDA_R_32F;
  const int device = weight.device().index;
  LtContext& ctx = lt_context(device);
  const void* bias_ptr = bias.defined() ? bias.raw_data() : nullptr;
  LtPlan& plan = lt_plan(ctx, device, type, rows, out_f, in_f, bias_ptr, lt_alignment(weight.raw_data()),
                         lt_alignment(x.raw_data()), lt_alignment(y.raw_data()));
  if (!plan.ok) return false;
  const float alpha = 1.0f, beta = 0.0f;
  std::lock_guard<std::mutex> lock(plan.mutex);
  if (bias_ptr)
    check_blas(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr,
                                              sizeof(bias_ptr)),
               "BIAS_POINTER");
  check_blas(cublasLtMatmul(ctx.handle, plan.op, &alpha, weight.raw_data(), plan.a, x.raw_data(), plan.b, &beta,
                            y.mutable_raw_data(), plan.c, y.mutable_raw_data(), plan.c, &plan.algo, ctx.workspace,
                            ctx.workspace_bytes, s),
             "cublasLtMatmul");
  return true;
}

#endif

}  // namespace

void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y) {
  const int64_t in_f = weight.size(1);
  const int64_t rows = x.numel() / in_f;
  if (rows == 0 || weight.size(0) == 0) return;
  gpuStream_t s = stream_for(x.device().index);
  if (rows <= kGemvMaxRows) return gemv_linear(x, weight, bias, dtype, y, rows, s);
#if defined(HIPFORMERS_WITH_CUBLASLT)
  if (cublaslt_linear(x, weight, bias, y, rows, s)) {
    // cuBLASLt rounds once into the storage dtype; an F32 tensor emulating a
    // narrower dtype is rounded here (bias already added).
    if (round_mode(dtype) != kRoundNone && x.dtype() == DType::kF32) {
      round_kernel<<<blocks_for(y.numel(), 256), 256, 0, s>>>(static_cast<float*>(y.mutable_raw_data()), y.numel(),
                                                              round_mode(dtype));
      check_launch("linear rounding");
    }
    return;
  }
#endif
  tiled_linear(x, weight, bias, dtype, y, rows, s);
}

bool fused_linear_supported(const Tensor& x, const Tensor& weight, const LinearFusion& fusion) {
  const int64_t in_f = weight.size(1);
  const int64_t rows = x.numel() / in_f;
  const int input = fusion.norm_weight ? kInputNorm : kInputPlain;
  return rows >= 1 && rows <= kGemvMaxRows && weight.size(0) > 0 &&
         gemv_fused_bytes(input, rows, in_f, x.dtype()) <= kGemvMaxFusedBytes;
}

void fused_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, const LinearFusion& fusion,
                  Tensor& y) {
  const int64_t rows = x.numel() / weight.size(1);
  GemvFusion f;
  f.norm_w = fusion.norm_weight ? fusion.norm_weight->raw_data() : nullptr;
  f.eps = static_cast<float>(fusion.eps);
  f.residual = fusion.residual ? fusion.residual->mutable_raw_data() : nullptr;
  gemv_linear(x, weight, bias, dtype, y, rows, stream_for(x.device().index),
              fusion.norm_weight ? kInputNorm : kInputPlain, fusion.swiglu_output ? kOutputSwiGLU : kOutputPlain, f);
}

// Exposed for the tests: the portable kernel, whatever the platform.
void tiled_linear_for_test(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y) {
  const int64_t rows = x.numel() / weight.size(1);
  if (rows == 0 || weight.size(0) == 0) return;
  tiled_linear(x, weight, bias, dtype, y, rows, stream_for(x.device().index));
}

}  // namespace hipformers::kernels::gpu
