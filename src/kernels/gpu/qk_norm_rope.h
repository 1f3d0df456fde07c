// One attention head's q/k RMSNorm (Qwen3; optional) and rotary embedding,
// computed by one warp. Shared by qkv_rope_write (qkv_rope_gpu.cu) and the
// decode attention kernel that does the same work in its prologue
// (paged_attention_gpu.cu), so the two paths agree bit for bit.
//
// Math, for x = the head's D values and half = D / 2:
//   n_i   = round(w_i * round(x_i / sqrt(mean(x^2) + eps)))   (as rms_norm, then stored as T)
//   out_i        = round(round(n_i c) - round(n_{i+half} s))
//   out_{i+half} = round(round(n_{i+half} c) + round(n_i s))
// with c = round(cos(pos f_i) scaling), s = sign round(sin(pos f_i) scaling),
// as rope_kernel computes them. The norm's sum reproduces rms_norm_kernel's
// reduction order for a row of D (norm_threads virtual threads, per-warp
// sums added in warp order).
#pragma once

#include "gpu_types.h"
#include "hipformers/core/tensor.h"

namespace hipformers::kernels::gpu {

struct QkNormRope {
  const float* inv_freq;  // [D / 2]
  int head_dim;
  int norm_threads;  // rms_norm's blockDim for a row of head_dim (norm_threads_for)
  float eps, scaling, sign;
  int mode;  // round_mode(dtype)
};

// The block size rms_norm() launches for a row of d values.
constexpr int norm_threads_for(int64_t d) { return d >= 1024 ? 1024 : d >= 256 ? 256 : 64; }

// inv_freq: F32 [head_dim / 2] on the device (qkv_rope.h).
inline QkNormRope qk_norm_rope_args(const Tensor& inv_freq, int64_t head_dim, double eps, float attention_scaling,
                                    DType dtype) {
  QkNormRope a{};
  a.inv_freq = static_cast<const float*>(inv_freq.raw_data());
  a.head_dim = static_cast<int>(head_dim);
  a.norm_threads = norm_threads_for(head_dim);
  a.eps = static_cast<float>(eps);
  a.scaling = attention_scaling;
  a.sign = 1.0f;
  a.mode = round_mode(dtype);
  return a;
}

// norm_rope_head for D = kPer * warp (kPer even): lane l holds elements
// l, l + warp, ... in registers, so every load of the head (and of its norm
// weights) is issued at once, and the pairs (i, i + D/2) that RoPE mixes
// sit in the same lane. The sum of squares runs in the generic path's order
// (virtual warp vw of rms_norm's block sums elements k * warp + lane with
// k % (norm_threads / warp) == vw, k rising), so both give the same bits.
// RoPE's rounded cos/sin for the pairs a lane rotates in the register path
// (kPer / 2 of them): they depend on the position alone, so a kernel may
// compute them before its input exists.
struct RopeCoefs {
  float c[2], s[2];
};
template <int kPer>
__device__ __forceinline__ RopeCoefs rope_coefs_regs(const QkNormRope& a, float pos, int lane) {
  static_assert(kPer / 2 <= 2, "RopeCoefs holds two pairs");
  RopeCoefs r{};
#pragma unroll
  for (int k = 0; k < kPer / 2; ++k) {
    const float angle = a.inv_freq[k * kWarp + lane] * pos;
    r.c[k] = round_to(cosf(angle) * a.scaling, a.mode);
    r.s[k] = a.sign * round_to(sinf(angle) * a.scaling, a.mode);
  }
  return r;
}
// Whether head_dim D takes the register path (and so RopeCoefs).
__device__ __forceinline__ bool rope_in_regs(int D) { return D == 2 * kWarp || D == 4 * kWarp; }
__device__ __forceinline__ RopeCoefs rope_coefs(const QkNormRope& a, float pos, int lane) {
  return a.head_dim == 2 * kWarp ? rope_coefs_regs<2>(a, pos, lane) : rope_coefs_regs<4>(a, pos, lane);
}

template <int kPer, typename T, typename Out>
__device__ __forceinline__ void norm_rope_head_regs(const T* src, const T* w, const QkNormRope& a,
                                                    const RopeCoefs& rc, int lane, Out out) {
  const int D = kPer * kWarp, half = D / 2, mode = a.mode;
  // rms_norm's virtual warps for a row of D (a.norm_threads is
  // norm_threads_for(D)), a constant: the loops unroll and k % nvw folds
  constexpr int nvw = norm_threads_for(kPer * kWarp) / kWarp;
  float x[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) x[k] = load(src + k * kWarp + lane);
  if (w) {
    float nw[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) nw[k] = load(w + k * kWarp + lane);
    float total = 0;
#pragma unroll
    for (int vw = 0; vw < nvw; ++vw) {
      float sum = 0;
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const float v = x[k];
        if (k % nvw == vw) sum += v * v;
      }
      total += warp_sum(sum);
    }
    const float inv = 1.0f / sqrtf(total / static_cast<float>(D) + a.eps);
#pragma unroll
    for (int k = 0; k < kPer; ++k)  // rms_norm's output, then what storing it as T keeps
      x[k] = round_to(round_to(nw[k] * round_to(x[k] * inv, mode), mode), Storage<T>::kMode);
  }
#pragma unroll
  for (int k = 0; k < kPer / 2; ++k) {
    const int i = k * kWarp + lane;
    const float x0 = x[k], x1 = x[k + kPer / 2];
    const float c = rc.c[k], s = rc.s[k];
    out(i, round_to(round_to(x0 * c, mode) + round_to(-x1 * s, mode), mode));
    out(i + half, round_to(round_to(x1 * c, mode) + round_to(x0 * s, mode), mode));
  }
}

// With the coefficients from rope_coefs (rope_in_regs(D) only).
template <typename T, typename Out>
__device__ __forceinline__ void norm_rope_head(const T* src, const T* w, const QkNormRope& a, const RopeCoefs& rc,
                                               int lane, Out out) {
  if (a.head_dim == 2 * kWarp) norm_rope_head_regs<2>(src, w, a, rc, lane, out);
  else norm_rope_head_regs<4>(src, w, a, rc, lane, out);
}

// out(i, v) receives every output element i in [0, D) once, v already
// rounded to the dtype (the caller stores it as T). w: the norm weight or
// null (no norm). Head dims of 2 or 4 warps take the register path above.
template <typename T, typename Out>
__device__ __forceinline__ void norm_rope_head(const T* src, const T* w, const QkNormRope& a, float pos, int lane,
                                               Out out) {
  const int D = a.head_dim, half = D / 2, mode = a.mode;
  if (D == 2 * kWarp) return norm_rope_head_regs<2>(src, w, a, rope_coefs_regs<2>(a, pos, lane), lane, out);
  if (D == 4 * kWarp) return norm_rope_head_regs<4>(src, w, a, rope_coefs_regs<4>(a, pos, lane), lane, out);
  float inv = 0;
  if (w) {
    float total = 0;
    for (int vw = 0; vw * kWarp < a.norm_threads; ++vw) {
      float sum = 0;
      for (int i = vw * kWarp + lane; i < D; i += a.norm_threads) {
        const float v = load(src + i);
        sum += v * v;
      }
      total += warp_sum(sum);
    }
    inv = 1.0f / sqrtf(total / static_cast<float>(D) + a.eps);
  }
  for (int i = lane; i < half; i += kWarp) {
    float x0 = load(src + i), x1 = load(src + i + half);
    if (w) {  // rms_norm's output, then what storing it as T keeps
      x0 = round_to(round_to(load(w + i) * round_to(x0 * inv, mode), mode), Storage<T>::kMode);
      x1 = round_to(round_to(load(w + i + half) * round_to(x1 * inv, mode), mode), Storage<T>::kMode);
    }
    const float angle = a.inv_freq[i] * pos;
    const float c = round_to(cosf(angle) * a.scaling, mode);
    const float s = a.sign * round_to(sinf(angle) * a.scaling, mode);
    out(i, round_to(round_to(x0 * c, mode) + round_to(-x1 * s, mode), mode));
    out(i + half, round_to(round_to(x1 * c, mode) + round_to(x0 * s, mode), mode));
  }
}

}  // namespace hipformers::kernels::gpu
