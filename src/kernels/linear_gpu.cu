// y[rows, out] = x[rows, in] W[out, in]^T (+ b), fp32 accumulation, one
// rounding to the storage/emulated dtype after the bias add (as cpu::linear).
// CUDA: cuBLASLt with CUBLAS_COMPUTE_32F (true fp32, never TF32: the fp32
// parity bar is 1e-3 relative) and the bias fused in its epilogue, so the
// bias is added before the single rounding. HIP (and any shape cuBLASLt has
// no algorithm for): the tiled kernel below.
#include <cstdint>
#include <map>
#include <mutex>

#include "backend.h"
#include "gpu/gpu_types.h"

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
    check_blas(cublasLtCreate(&c.handle), "cublasLtCreate");
    check(cudaMalloc(&c.workspace, c.workspace_bytes), "cudaMalloc(cublasLt workspace)");
  }
  return c;
}

// Returns false when cuBLASLt offers no algorithm (the caller falls back).
bool cublaslt_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& y, int64_t rows,
                     gpuStream_t s) {
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  const cudaDataType_t type = x.dtype() == DType::kBF16 ? CUDA_R_16BF : x.dtype() == DType::kF16 ? CUDA_R_16F : CUDA_R_32F;
  LtContext& ctx = lt_context(weight.device().index);
  // Column-major view: y^T[out, rows] = op(W)[out, in] * x^T[in, rows], with W
  // stored as [in, out] column-major (ld in) and transposed.
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  struct Cleanup {
    cublasLtMatmulDesc_t& op;
    cublasLtMatrixLayout_t &a, &b, &c;
    cublasLtMatmulPreference_t& pref;
    ~Cleanup() {
      if (pref) cublasLtMatmulPreferenceDestroy(pref);
      if (c) cublasLtMatrixLayoutDestroy(c);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (op) cublasLtMatmulDescDestroy(op);
    }
  } cleanup{op, a, b, c, pref};
  check_blas(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
  check_blas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)), "TRANSA");
  check_blas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)), "TRANSB");
  if (bias.defined()) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const void* bias_ptr = bias.raw_data();
    check_blas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
               "EPILOGUE");
    check_blas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)),
               "BIAS_POINTER");
    check_blas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)),
               "BIAS_DATA_TYPE");
  }
  check_blas(cublasLtMatrixLayoutCreate(&a, type, in_f, out_f, in_f), "layout A");
  check_blas(cublasLtMatrixLayoutCreate(&b, type, in_f, rows, in_f), "layout B");
  check_blas(cublasLtMatrixLayoutCreate(&c, type, out_f, rows, out_f), "layout C");
  check_blas(cublasLtMatmulPreferenceCreate(&pref), "preference");
  check_blas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ctx.workspace_bytes, sizeof(ctx.workspace_bytes)),
             "workspace preference");
  // cuBLASLt assumes 256-byte-aligned operands unless told otherwise; views
  // such as the last row of a [T, hidden] tensor can be less aligned.
  auto alignment = [](const void* p) {
    uint32_t a = 256;
    while (a > 1 && reinterpret_cast<std::uintptr_t>(p) % a) a /= 2;
    return a;
  };
  const uint32_t align_a = alignment(weight.raw_data()), align_b = alignment(x.raw_data()),
                 align_c = alignment(y.raw_data());
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
  if (cublasLtMatmulAlgoGetHeuristic(ctx.handle, op, a, b, c, c, pref, 1, &heuristic, &found) !=
          CUBLAS_STATUS_SUCCESS ||
      found == 0)
    return false;
  const float alpha = 1.0f, beta = 0.0f;
  check_blas(cublasLtMatmul(ctx.handle, op, &alpha, weight.raw_data(), a, x.raw_data(), b, &beta,
                            y.mutable_raw_data(), c, y.mutable_raw_data(), c, &heuristic.algo, ctx.workspace,
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

// Exposed for the tests: the portable kernel, whatever the platform.
void tiled_linear_for_test(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y) {
  const int64_t rows = x.numel() / weight.size(1);
  if (rows == 0 || weight.size(0) == 0) return;
  tiled_linear(x, weight, bias, dtype, y, rows, stream_for(x.device().index));
}

}  // namespace hipformers::kernels::gpu
