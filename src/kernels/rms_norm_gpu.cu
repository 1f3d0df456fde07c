#include <cmath>

#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/launch.h"

namespace hipformers::kernels::gpu {
namespace {

// One block per row. With `add`, the residual row is updated first (rounded
// as stored) and the norm reads it back, as the CPU reference does.
template <typename T>
__global__ void rms_norm_kernel(const T* __restrict__ add, T* x, const T* __restrict__ weight, T* out,
                                float* __restrict__ rstd, int64_t H, float eps, int mode) {
  allow_dependents();
  grid_dependency_wait();  // launched dependent (gpu/launch.h)
  __shared__ float scratch[kMaxWarps];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * H;
  float sum = 0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v;
    if (add) {
      v = round_to(load(add + base + i) + load(x + base + i), mode);
      store(x + base + i, v);
      v = load(x + base + i);  // what was stored, e.g. bf16-rounded
    } else {
      v = load(x + base + i);
    }
    sum += v * v;
  }
  sum = block_sum(sum, scratch);
  const float inv = 1.0f / sqrtf(sum / static_cast<float>(H) + eps);
  if (rstd && threadIdx.x == 0) rstd[blockIdx.x] = inv;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const float xv = load(x + base + i);
    store(out + base + i, round_to(load(weight + i) * round_to(xv * inv, mode), mode));
  }
}

}  // namespace

void rms_norm(const Tensor* add, Tensor& x, const Tensor& weight, double eps, DType dtype, Tensor& out,
              Tensor* rstd) {
  const int64_t H = weight.size(0);
  const int64_t rows = x.numel() / H;
  if (rows == 0) return;
  gpuStream_t s = stream_for(x.device().index);
  const int threads = H >= 1024 ? 1024 : H >= 256 ? 256 : 64;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Without `add`, x is only read: it may be a read-only view.
    T* xp = add ? static_cast<T*>(x.mutable_raw_data()) : const_cast<T*>(static_cast<const T*>(x.raw_data()));
    launch_dependent(rms_norm_kernel<T>, dim3(static_cast<unsigned>(rows)), dim3(threads), 0, s,
        add ? static_cast<const T*>(add->raw_data()) : nullptr, xp, static_cast<const T*>(weight.raw_data()),
        static_cast<T*>(out.mutable_raw_data()), rstd ? static_cast<float*>(rstd->mutable_raw_data()) : nullptr, H,
        static_cast<float>(eps), round_mode(dtype));
  });
  check_launch("rms_norm");
}

}  // namespace hipformers::kernels::gpu
