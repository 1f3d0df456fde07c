// Fused causal attention over the KV cache, one block per (query, head).
// Each warp walks a strided subset of the visible keys with its own online
// softmax state (running max m, sum l, accumulator over head_dim spread
// across lanes); the warps' states are merged at the end. Keys and values
// are read once per query row. GQA maps query head h to kv head h / group.
//
// sdpa: the CPU reference's one-pass math (p = round(exp(s - m)) accumulated,
//       divided by the sum at the end, output rounded).
// eager: two passes with torch's eager rounding points: s = round(round(q.k) *
//       scale); the first pass finds max and sum, the second forms
//       p = round(exp(s - max) / sum), optionally stores it to `probs`
//       ([heads, T, S], zeros where masked) and accumulates p v.
#include <limits>

#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/upload.h"

namespace hipformers::kernels::gpu {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxD = static_cast<int>(kMaxAttentionHeadDim);
constexpr int kPerLane = kMaxD / kWarp;
constexpr int kWarpsMax = kThreads / 32;

template <typename T>
__global__ void kv_append_kernel(const T* __restrict__ k, const T* __restrict__ v, T* kc, T* vc, int64_t kv_heads,
                                 int64_t dim, int64_t capacity, int64_t length) {
  const int64_t t = blockIdx.x;
  for (int64_t e = threadIdx.x; e < kv_heads * dim; e += blockDim.x) {
    const int64_t h = e / dim, i = e % dim;
    const int64_t dst = (h * capacity + length + t) * dim + i;
    kc[dst] = k[t * kv_heads * dim + e];
    vc[dst] = v[t * kv_heads * dim + e];
  }
}

template <typename T>
__device__ __forceinline__ float dot_row(const float (&q)[kPerLane], const T* __restrict__ krow, int D, int lane) {
  float d = 0;
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int i = lane + c * kWarp;
    if (i < D) d = fmaf(q[c], load(krow + i), d);
  }
  return warp_sum(d);
}

template <typename T, bool kEager>
__global__ void __launch_bounds__(kThreads) attention_kernel(
    const T* __restrict__ q, const int64_t* __restrict__ positions, const T* __restrict__ kc,
    const T* __restrict__ vc, T* __restrict__ out, float* __restrict__ probs, int T_len, int heads, int group, int D,
    int64_t capacity, int64_t S, float scale, int64_t window, int mode) {
  __shared__ float s_m[kWarpsMax], s_l[kWarpsMax];
  __shared__ float s_acc[kWarpsMax][kMaxD];
  const int t = blockIdx.x / heads, h = blockIdx.x % heads;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  const int64_t pos = positions[t];
  const int64_t first = window > 0 ? (pos - window + 1 > 0 ? pos - window + 1 : 0) : 0;
  const T* kh = kc + static_cast<int64_t>(h / group) * capacity * D;
  const T* vh = vc + static_cast<int64_t>(h / group) * capacity * D;
  const T* qv = q + (static_cast<int64_t>(t) * heads + h) * D;

  float qr[kPerLane], acc[kPerLane];
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int i = lane + c * kWarp;
    qr[c] = i < D ? load(qv + i) : 0.0f;
    acc[c] = 0.0f;
  }
  auto score = [&](int64_t j) {
    const float dot = dot_row(qr, kh + j * D, D, lane);
    return kEager ? round_to(round_to(dot, mode) * scale, mode) : dot * scale;
  };
  auto add_value = [&](int64_t j, float p) {
    const T* vrow = vh + j * D;
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) {
      const int i = lane + c * kWarp;
      if (i < D) acc[c] = fmaf(p, load(vrow + i), acc[c]);
    }
  };

  // Pass over this warp's keys: running max and sum (and, for sdpa, the
  // accumulator rescaled whenever the max grows).
  float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
  for (int64_t j = first + warp; j <= pos; j += warps) {
    const float s = score(j);
    if (s > m) {
      const float correction = expf(m - s);
      l *= correction;
      if (!kEager) {
#pragma unroll
        for (int c = 0; c < kPerLane; ++c) acc[c] *= correction;
      }
      m = s;
    }
    const float e = expf(s - m);
    l += e;
    if (!kEager) add_value(j, round_to(e, mode));
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
  __syncthreads();
  float max = -std::numeric_limits<float>::infinity();
  for (int w = 0; w < warps; ++w) max = fmaxf(max, s_m[w]);
  float sum = 0.0f;
  for (int w = 0; w < warps; ++w)
    if (s_l[w] > 0.0f) sum += s_l[w] * expf(s_m[w] - max);

  if (kEager) {
    for (int64_t j = first + warp; j <= pos; j += warps) {
      const float p = round_to(expf(score(j) - max) / sum, mode);
      if (probs && lane == 0) probs[(static_cast<int64_t>(h) * T_len + t) * S + j] = p;
      add_value(j, p);
    }
  } else {
    // Bring every warp's accumulator to the common max.
    const float factor = s_l[warp] > 0.0f ? expf(s_m[warp] - max) : 0.0f;
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) acc[c] *= factor;
  }
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int i = lane + c * kWarp;
    if (i < D) s_acc[warp][i] = acc[c];
  }
  __syncthreads();
  T* y = out + (static_cast<int64_t>(t) * heads + h) * D;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float total = 0.0f;
    for (int w = 0; w < warps; ++w) total += s_acc[w][i];
    store(y + i, round_to(kEager ? total : total / sum, mode));
  }
}

}  // namespace

void kv_cache_append(KVCacheView& cache, const Tensor& k, const Tensor& v) {
  const int64_t kv_heads = cache.k.size(0), capacity = cache.k.size(1), dim = cache.k.size(2);
  const int64_t T = k.numel() / (kv_heads * dim);
  if (T > 0) {
    gpuStream_t s = stream_for(k.device().index);
    dispatch_float(k.dtype(), [&](auto tag) {
      using E = decltype(tag);
      kv_append_kernel<E><<<static_cast<unsigned>(T), 256, 0, s>>>(
          static_cast<const E*>(k.raw_data()), static_cast<const E*>(v.raw_data()),
          static_cast<E*>(cache.k.mutable_raw_data()), static_cast<E*>(cache.v.mutable_raw_data()), kv_heads, dim,
          capacity, cache.length);
    });
    check_launch("kv_cache_append");
  }
  cache.length += T;
}

void attention(const Tensor& q, std::span<const int64_t> positions, const KVCacheView& cache,
               const AttentionSpec& spec, Tensor& out, Tensor* probs) {
  const auto T = static_cast<int64_t>(positions.size());
  if (T == 0) return;
  const Device device = q.device();
  gpuStream_t s = stream_for(device.index);
  const int64_t S = cache.length;
  float* probs_ptr = nullptr;
  if (probs && spec.eager) {
    probs_ptr = static_cast<float*>(probs->mutable_raw_data());
    check(gpuMemsetAsync(probs_ptr, 0, probs->nbytes(), s), "gpuMemsetAsync(probs)");
  }
  Tensor d_pos = upload(positions, DType::kI64, device);
  const int64_t window = spec.sliding_window ? *spec.sliding_window : 0;
  const auto blocks = static_cast<unsigned>(T * spec.heads);
  dispatch_float(q.dtype(), [&](auto tag) {
    using E = decltype(tag);
    auto args = [&](auto kernel) {
      kernel<<<blocks, kThreads, 0, s>>>(
          static_cast<const E*>(q.raw_data()), static_cast<const int64_t*>(d_pos.raw_data()),
          static_cast<const E*>(cache.k.raw_data()), static_cast<const E*>(cache.v.raw_data()),
          static_cast<E*>(out.mutable_raw_data()), probs_ptr, static_cast<int>(T), static_cast<int>(spec.heads),
          static_cast<int>(spec.heads / spec.kv_heads), static_cast<int>(spec.head_dim), cache.k.size(1), S,
          spec.scale, window, round_mode(spec.dtype));
    };
    if (spec.eager) args(attention_kernel<E, true>);
    else args(attention_kernel<E, false>);
  });
  check_launch("attention");
}

}  // namespace hipformers::kernels::gpu
