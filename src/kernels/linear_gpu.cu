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
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/gemv.h"
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

// ---- GEMV: rows <= kGemvMaxRows (gpu/gemv.h) --------------------------------
// One GemvBlock per block. Weights depend on no earlier kernel, so the
// block's first chunk goes into registers and the rest of its slice into L2
// before it lets the next kernel be scheduled and waits for its input.
// Two blocks must fit a multiprocessor (GemvGrid), so registers are capped
// at 128 a thread: a few more (133, measured after an unrelated change)
// leave room for one block and made the batch-1 step 24% slower on an H100.
template <typename T, int ROWS, bool kVec, int kInput, int kOutput>
__global__ void __launch_bounds__(kGemvThreads, 2) gemv_kernel(GemvArgs<T> args) {
  StepTraceScope trace_scope;
  GemvBlock<T, ROWS, kVec, kInput, kOutput> g(args, blockIdx.x, gridDim.x);
  g.load_first();
  g.prefetch_l2();
  allow_dependents();
  grid_dependency_wait();  // launched dependent (gpu/launch.h)
  g.run();
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
    info.warp = kernel_warp_size(prop.warpSize > 0 ? prop.warpSize : 32);
  }
  return info;
}

// Grid shape of the GEMV. At most blocks_per_sm blocks per multiprocessor
// (0: one block per tile): a block holds ~100 registers x 256 threads, so
// uncapped grids fill the register file and the next kernel of a decode
// step, launched dependent, finds no room to start loading its weights; one
// block per SM leaves too few loads in flight. Two measured best on the
// H200 (docs/PERFORMANCE.md). The K split grows until the tiles hold about
// warp_tasks_per_sm warps' work per SM (gemv_split, gpu/gemv.h): 8 measured
// best on the H200 for batch 1 and 8 (against 12, 16, 24: fewer, longer
// warp tasks and fewer split sums). HIPFORMERS_GEMV_BLOCKS_PER_SM and
// HIPFORMERS_GEMV_WARP_TASKS_PER_SM override them (for A/B measurements).
struct GemvGrid {
  int blocks_per_sm = 2, warp_tasks_per_sm = 8;
  int64_t l2_prefetch_bytes = int64_t{32} << 20;  // HIPFORMERS_GEMV_L2_BYTES; 0: no bound
};
GemvGrid gemv_grid() {
  static const GemvGrid grid = [] {
    GemvGrid g;
    auto env = [](const char* name, int& value) {
      if (const char* v = std::getenv(name); v && *v) value = std::max(0, std::atoi(v));
    };
    env("HIPFORMERS_GEMV_BLOCKS_PER_SM", g.blocks_per_sm);
    env("HIPFORMERS_GEMV_WARP_TASKS_PER_SM", g.warp_tasks_per_sm);
    if (g.warp_tasks_per_sm < 1) g.warp_tasks_per_sm = 1;
    if (const char* v = std::getenv("HIPFORMERS_GEMV_L2_BYTES"); v && *v) g.l2_prefetch_bytes = std::max(0LL, std::atoll(v));
    return g;
  }();
  return grid;
}

constexpr std::size_t kGemvMaxFusedBytes = 40 << 10;  // under the 48 KiB every GPU gives without opting in

void gemv_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y, int64_t rows,
                 gpuStream_t s, int input = kInputPlain, int output = kOutputPlain, const GemvFusion& fusion = {}) {
  const int64_t in_f = weight.size(1);
  const int64_t out_f = output == kOutputSwiGLU ? weight.size(0) / 2 : weight.size(0);
  const GemvDeviceInfo info = gemv_device_info(x.device().index);
  const int warps = kGemvThreads / info.warp;
  const int64_t groups = gemv_groups(out_f, output);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // 16-byte loads of W and x (the norm weight is staged in shared memory).
    const bool vec = in_f % kVec16<T> == 0 && aligned16(weight.raw_data()) && aligned16(x.raw_data());
    const int64_t nv = vec ? in_f / kVec16<T> : in_f;
    const GemvGrid grid = gemv_grid();
    GemvArgs<T> a;
    a.split = gemv_split(groups, nv, warps, info.warp, static_cast<int64_t>(info.sms) * grid.warp_tasks_per_sm);
    const int64_t per_block = warps / a.split;
    const int64_t tiles = (groups + per_block - 1) / per_block;
    const auto blocks = static_cast<unsigned>(
        grid.blocks_per_sm > 0 ? std::min<int64_t>(tiles, static_cast<int64_t>(info.sms) * grid.blocks_per_sm) : tiles);
    a.x = static_cast<const T*>(x.raw_data());
    a.w = static_cast<const T*>(weight.raw_data());
    a.bias = bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr;
    a.y = static_cast<T*>(y.mutable_raw_data());
    a.rows = static_cast<int>(rows);
    a.out_f = out_f;
    a.in_f = in_f;
    a.mode = round_mode(dtype);
    a.fusion = fusion;
    a.prefetch_tiles = gemv_prefetch_tiles(blocks, per_block, in_f, sizeof(T), grid.l2_prefetch_bytes);
    const std::size_t shared = gemv_fused_bytes(input, rows, in_f, x.dtype());
    auto launch = [&](auto rows_tag, auto vec_tag) {
      constexpr int kRows = decltype(rows_tag)::value;
      constexpr bool kV = decltype(vec_tag)::value;
      auto go = [&](auto kernel) { launch_dependent(kernel, dim3(blocks), dim3(kGemvThreads), shared, s, a); };
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
