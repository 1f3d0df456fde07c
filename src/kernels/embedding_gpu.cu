#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/launch.h"
#include "gpu/upload.h"
#include "gpu/vec16.h"

namespace hipformers::kernels::gpu {
namespace {

template <typename T>
__global__ void embedding_kernel(const T* __restrict__ weight, const int32_t* __restrict__ ids, T* __restrict__ out,
                                 int64_t hidden) {
  const int64_t t = blockIdx.x;
  const T* row = weight + static_cast<int64_t>(ids[t]) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) out[t * hidden + i] = row[i];
}

// out[t] = weight[ids[t]] as raw units U (16, 4 or 2 bytes, whatever the
// pointers and the row size allow); an id outside [0, rows) gives zeros.
template <typename U>
__global__ void gather_rows_kernel(const U* __restrict__ weight, const int32_t* __restrict__ ids, U* __restrict__ out,
                                   int64_t rows, int64_t units) {
  allow_dependents();
  grid_dependency_wait();  // launched dependent (gpu/launch.h)
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  U* dst = out + t * units;
  if (id < 0 || id >= rows) {
    for (int64_t i = threadIdx.x; i < units; i += blockDim.x) dst[i] = U{};
    return;
  }
  const U* src = weight + static_cast<int64_t>(id) * units;
  for (int64_t i = threadIdx.x; i < units; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& ids, Tensor& out) {
  const int64_t n = ids.numel();
  if (n == 0 || weight.size(1) == 0) return;
  gpuStream_t s = stream_for(weight.device().index);
  const auto row_bytes = static_cast<int64_t>(weight.size(1) * static_cast<int64_t>(dtype_size(weight.dtype())));
  const auto addr = reinterpret_cast<std::uintptr_t>(weight.raw_data()) | reinterpret_cast<std::uintptr_t>(out.raw_data()) |
                    static_cast<std::uintptr_t>(row_bytes);
  const int64_t rows = weight.size(0);
  const auto* id = static_cast<const int32_t*>(ids.raw_data());
  auto launch = [&](auto unit) {
    using U = decltype(unit);
    const int64_t units = row_bytes / static_cast<int64_t>(sizeof(U));
    const int threads = static_cast<int>(std::min<int64_t>(256, ((units + 31) / 32) * 32));
    launch_dependent(gather_rows_kernel<U>, dim3(static_cast<unsigned>(n)), dim3(threads), 0, s,
                     static_cast<const U*>(weight.raw_data()), id, static_cast<U*>(out.mutable_raw_data()), rows, units);
  };
  if (addr % 16 == 0) launch(uint4{});
  else if (addr % 4 == 0) launch(uint32_t{});
  else launch(uint16_t{});
  check_launch("embedding");
}

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
