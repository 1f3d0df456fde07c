#include "backend.h"
#include "gpu/gpu_types.h"

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

}  // namespace

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
