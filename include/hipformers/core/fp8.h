// The 8-bit float formats of FP8 checkpoints and GPUs, bit for bit as
// PyTorch converts them (torch.float8_e4m3fn, float8_e4m3fnuz). Header-only and usable in GPU kernels (host and device
// when compiled by nvcc or hipcc).
//
//   e4m3fn   (OCP; safetensors "F8_E4M3"; NVIDIA Hopper/Blackwell, AMD
//            gfx950): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits;
//            no infinities, S.1111.111 is NaN, max 448, min subnormal 2^-9.
//   e4m3fnuz (AMD gfx940/941/942, MI300's FP8 instructions): bias 8, no
//            negative zero (0x80 is the only NaN), no infinities, max 240,
//            min subnormal 2^-10. The same bits as e4m3fn are half the
//            value: a checkpoint's e4m3fn weight becomes fnuz by keeping
//            its bits (but 0x80, -0, becomes 0 and fn's NaNs become 0x80)
//            and doubling its scale.
//   e5m2     (safetensors "F8_E5M2"): the top byte of an IEEE half, so it
//            decodes as f16_to_float(code << 8) (core/tensor.h).
//
// Encoding rounds to nearest, ties to even; a value that rounds beyond the
// largest finite one (and +-inf, NaN) gives NaN, as torch's conversion does
// (it does not saturate).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>

// Host and device functions under nvcc and clang's HIP mode (spelled as
// clang attributes there: the HIP runtime headers that define __host__ may
// come after this one), plain inline functions elsewhere.
#if defined(__HIP__)
#define HF_FP8_FN __attribute__((host, device)) inline
#elif defined(__CUDACC__)
#define HF_FP8_FN __host__ __device__ inline
#else
#define HF_FP8_FN inline
#endif

namespace hipformers {

enum class Fp8Format { kE4M3FN, kE4M3FNUZ };

namespace fp8_detail {
HF_FP8_FN float bits_to_float(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
HF_FP8_FN uint32_t float_to_bits(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  return u;
}
// An e4m3 code (sign stripped) with exponent bias `bias` as a float; codes
// are never NaN here.
HF_FP8_FN float e4m3_magnitude(uint32_t code, int bias) {
  const uint32_t exp = code >> 3, mant = code & 7u;
  if (exp == 0) return static_cast<float>(mant) * bits_to_float(static_cast<uint32_t>(127 - bias - 2) << 23);
  return bits_to_float(((exp + 127u - static_cast<uint32_t>(bias)) << 23) | (mant << 20));
}
// |x| (finite, not NaN) as the nearest e4m3 code with exponent bias `bias`
// (ties to even); may exceed 0x7f when x is too large.
HF_FP8_FN uint32_t e4m3_round(uint32_t abs_bits, int bias) {
  const uint32_t min_normal = static_cast<uint32_t>(128 - bias) << 23;  // 2^(1 - bias)
  if (abs_bits < min_normal) {
    // Subnormal: the multiple of 2^(1 - bias - 3) nearest to x, ties to even.
    // Adding 2^(1 - bias - 3 + 23) aligns it to the last place of a float.
    const float magic = bits_to_float(static_cast<uint32_t>(127 + 1 - bias - 3 + 23) << 23);
    const float sum = bits_to_float(abs_bits) + magic;  // rounds to nearest even
    return float_to_bits(sum) - float_to_bits(magic);
  }
  uint32_t code = (((abs_bits >> 23) - 127u + static_cast<uint32_t>(bias)) << 3) | ((abs_bits >> 20) & 7u);
  const uint32_t rest = abs_bits & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (code & 1u))) ++code;  // a carry moves into the exponent: correct
  return code;
}
}  // namespace fp8_detail

HF_FP8_FN float fp8_e4m3fn_to_float(uint8_t b) {
  const uint32_t code = b & 0x7fu;
  if (code == 0x7fu) return fp8_detail::bits_to_float(0x7fc00000u | (static_cast<uint32_t>(b & 0x80u) << 24));
  const float m = fp8_detail::e4m3_magnitude(code, 7);
  return (b & 0x80u) ? -m : m;
}

HF_FP8_FN float fp8_e4m3fnuz_to_float(uint8_t b) {
  if (b == 0x80u) return fp8_detail::bits_to_float(0x7fc00000u);
  const float m = fp8_detail::e4m3_magnitude(b & 0x7fu, 8);
  return (b & 0x80u) ? -m : m;
}

HF_FP8_FN uint8_t float_to_fp8_e4m3fn(float x) {
  const uint32_t u = fp8_detail::float_to_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u, abs_bits = u & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);  // inf, NaN
  const uint32_t code = fp8_detail::e4m3_round(abs_bits, 7);
  return static_cast<uint8_t>(sign | (code > 0x7eu ? 0x7fu : code));
}

HF_FP8_FN uint8_t float_to_fp8_e4m3fnuz(float x) {
  const uint32_t u = fp8_detail::float_to_bits(x);
  const uint32_t abs_bits = u & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) return 0x80u;
  const uint32_t code = fp8_detail::e4m3_round(abs_bits, 8);
  if (code > 0x7fu) return 0x80u;
  if (code == 0) return 0;  // no negative zero
  return static_cast<uint8_t>(((u >> 24) & 0x80u) | code);
}

// An e4m3fn code as the e4m3fnuz code of half its value (the scale that
// multiplies it doubles): the same bits, but -0 is 0 and NaN is 0x80.
HF_FP8_FN uint8_t fp8_e4m3fn_to_fnuz_bits(uint8_t b) {
  if ((b & 0x7fu) == 0x7fu) return 0x80u;
  return b == 0x80u ? 0 : b;
}

HF_FP8_FN float fp8_e4m3_to_float(uint8_t b, Fp8Format format) {
  return format == Fp8Format::kE4M3FNUZ ? fp8_e4m3fnuz_to_float(b) : fp8_e4m3fn_to_float(b);
}

// The e4m3 format of a GPU's own FP8 instructions, from its architecture
// string ("sm_90", "gfx942:sramecc+:xnack-", "gfx950"): fnuz on gfx940,
// gfx941 and gfx942 (MI300), the OCP format everywhere else.
inline Fp8Format native_fp8_e4m3_format(const char* arch) {
  for (const char* fnuz : {"gfx940", "gfx941", "gfx942"}) {
    const std::size_t n = strlen(fnuz);
    if (strncmp(arch, fnuz, n) == 0 && (arch[n] == '\0' || arch[n] == ':')) return Fp8Format::kE4M3FNUZ;
  }
  return Fp8Format::kE4M3FN;
}

inline const char* fp8_format_name(Fp8Format format) {
  return format == Fp8Format::kE4M3FNUZ ? "float8_e4m3fnuz" : "float8_e4m3fn";
}

}  // namespace hipformers
