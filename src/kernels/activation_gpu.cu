#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/launch.h"
#include "gpu/vec16.h"

namespace hipformers::kernels::gpu {
namespace {

template <typename T>
__global__ void silu_and_mul_kernel(const T* gate, const T* up, T* out, int64_t n, int mode) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = load(gate + i);
    const float silu = g / (1.0f + expf(-g));
    store(out + i, round_to(round_to(silu, mode) * load(up + i), mode));
  }
}

// gate_up [rows, 2I] -> out [rows, I], V elements per thread and step (16-byte
// vectors when every row start is 16-byte aligned, else one element).
template <typename T, bool kVec>
__global__ void silu_and_mul_packed_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t rows,
                                           int64_t I, int mode) {
  StepTraceScope trace_scope;
  allow_dependents();
  grid_dependency_wait();  // launched dependent (gpu/launch.h)
  constexpr int V = kVec ? kVec16<T> : 1;
  const int64_t per_row = I / V, n = rows * per_row;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = k / per_row, c = (k - r * per_row) * V;
    const T* gate = gate_up + r * 2 * I + c;
    const T* up = gate + I;
    T* o = out + r * I + c;
    if constexpr (kVec) {
      const uint4 gv = *reinterpret_cast<const uint4*>(gate), uv = *reinterpret_cast<const uint4*>(up);
      uint4 ov = gv;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float g = vec16_get<T>(gv, e);
        const float silu = g / (1.0f + expf(-g));
        vec16_put<T>(ov, e, round_to(round_to(silu, mode) * vec16_get<T>(uv, e), mode));
      }
      *reinterpret_cast<uint4*>(o) = ov;
    } else {
      const float g = load(gate);
      const float silu = g / (1.0f + expf(-g));
      store(o, round_to(round_to(silu, mode) * load(up), mode));
    }
  }
}

}  // namespace

void silu_and_mul_packed(const Tensor& gate_up, DType dtype, Tensor& out) {
  const int64_t I = out.size(-1);
  const int64_t rows = I == 0 ? 0 : out.numel() / I;
  if (rows == 0) return;
  gpuStream_t s = stream_for(out.device().index);
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const bool vec = (I * static_cast<int64_t>(sizeof(T))) % 16 == 0 && aligned16(gate_up.raw_data()) &&
                     aligned16(out.raw_data());
    const int64_t work = rows * (vec ? I / kVec16<T> : I);
    auto launch = [&](auto kernel) {
      launch_dependent(kernel, dim3(blocks_for(work, 256)), dim3(256), 0, s,
                       static_cast<const T*>(gate_up.raw_data()), static_cast<T*>(out.mutable_raw_data()), rows, I,
                       static_cast<int>(round_mode(dtype)));
    };
    if (vec) launch(silu_and_mul_packed_kernel<T, true>);
    else launch(silu_and_mul_packed_kernel<T, false>);
  });
  check_launch("silu_and_mul_packed");
}

void silu_and_mul(const Tensor& gate, const Tensor& up, DType dtype, Tensor& out) {
  const int64_t n = gate.numel();
  if (n == 0) return;
  gpuStream_t s = stream_for(gate.device().index);
  dispatch_float(gate.dtype(), [&](auto tag) {
    using T = decltype(tag);
    silu_and_mul_kernel<T><<<blocks_for(n, 256), 256, 0, s>>>(static_cast<const T*>(gate.raw_data()),
                                                              static_cast<const T*>(up.raw_data()),
                                                              static_cast<T*>(out.mutable_raw_data()), n,
                                                              round_mode(dtype));
  });
  check_launch("silu_and_mul");
}

}  // namespace hipformers::kernels::gpu
