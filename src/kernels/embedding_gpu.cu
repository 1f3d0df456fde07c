#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/upload.h"

namespace hipformers::kernels::gpu {
namespace {

template <typename T>
__global__ void embedding_kernel(const T* __restrict__ weight, const int32_t* __restrict__ ids, T* __restrict__ out,
                                 int64_t hidden) {
  const int64_t t = blockIdx.x;
  const T* row = weight + static_cast<int64_t>(ids[t]) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) out[t * hidden + i] = row[i];
}

}  // namespace

void embedding(const Tensor& weight, std::span<const int32_t> ids, Tensor& out) {
  if (ids.empty()) return;
  const Device device = weight.device();
  gpuStream_t s = stream_for(device.index);
  Tensor d_ids = upload(ids, DType::kI32, device);
  const int64_t hidden = weight.size(1);
  dispatch_float(weight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    embedding_kernel<T><<<static_cast<unsigned>(ids.size()), 256, 0, s>>>(
        static_cast<const T*>(weight.raw_data()), static_cast<const int32_t*>(d_ids.raw_data()),
        static_cast<T*>(out.mutable_raw_data()), hidden);
  });
  check_launch("embedding");
}

}  // namespace hipformers::kernels::gpu
