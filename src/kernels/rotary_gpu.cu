#include <vector>

#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/upload.h"

namespace hipformers::kernels::gpu {
namespace {

// Block (t, h-chunk); a thread per pair (i, i + half). cos/sin are computed
// from the CPU-built inv_freq table exactly as the reference does (fp32 angle,
// times attention scaling, rounded to the dtype).
template <typename T>
__global__ void rope_kernel(T* x, const int64_t* __restrict__ positions, const float* __restrict__ inv_freq,
                            int64_t heads, int64_t half, float scaling, float sign, int mode) {
  const int64_t t = blockIdx.x;
  const float pos = static_cast<float>(positions[t]);
  for (int64_t k = threadIdx.x; k < heads * half; k += blockDim.x) {
    const int64_t h = k / half, i = k % half;
    const float angle = inv_freq[i] * pos;
    const float c = round_to(cosf(angle) * scaling, mode);
    const float s = sign * round_to(sinf(angle) * scaling, mode);
    T* v = x + (t * heads + h) * 2 * half;
    const float a = load(v + i), b = load(v + i + half);
    store(v + i, round_to(round_to(a * c, mode) + round_to(-b * s, mode), mode));
    store(v + i + half, round_to(round_to(b * c, mode) + round_to(a * s, mode), mode));
  }
}

}  // namespace

void apply_rope(Tensor& x, int64_t heads, std::span<const int64_t> positions, const RopeFrequencies& freqs,
                DType dtype, bool inverse) {
  if (positions.empty()) return;
  const Device device = x.device();
  gpuStream_t s = stream_for(device.index);
  Tensor d_pos = upload(positions, DType::kI64, device);
  Tensor d_freq = upload(std::span<const float>(freqs.inv_freq), DType::kF32, device);
  const auto half = static_cast<int64_t>(freqs.inv_freq.size());
  const int threads = static_cast<int>(std::min<int64_t>(256, ((heads * half + 63) / 64) * 64));
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    rope_kernel<T><<<static_cast<unsigned>(positions.size()), threads, 0, s>>>(
        static_cast<T*>(x.mutable_raw_data()), static_cast<const int64_t*>(d_pos.raw_data()),
        static_cast<const float*>(d_freq.raw_data()), heads, half, freqs.attention_scaling, inverse ? -1.0f : 1.0f,
        round_mode(dtype));
  });
  check_launch("rope");
}

}  // namespace hipformers::kernels::gpu
