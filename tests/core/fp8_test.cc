// FP8 codecs (core/fp8.h; e5m2 through convert_to_float) against an
// independent reference: every code decoded by the format's formula, every
// float encoded by searching all codes for the nearest (ties to the even
// code), torch's known values, and the fn -> fnuz re-encoding; plus
// Tensor::to with FP8.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/core/fp8.h"
#include "hipformers/core/tensor.h"

namespace hipformers {
namespace {

// (-1)^s 2^(e - bias) (1 + m / 8), subnormals 2^(1 - bias) m / 8.
double formula(uint8_t b, int bias) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, 1 - bias) : std::ldexp(1.0 + m / 8.0, e - bias);
  return s ? -mag : mag;
}
bool fn_nan(uint8_t b) { return (b & 0x7f) == 0x7f; }
bool fnuz_nan(uint8_t b) { return b == 0x80; }

// The nearest finite code to x (ties to the even code), or -1 when x rounds
// past the largest finite value (half an ulp beyond it).
int nearest(double x, int bias, bool fnuz) {
  int best = -1;
  double best_d = 0;
  for (int c = 0; c < 256; ++c) {
    const auto b = static_cast<uint8_t>(c);
    if (fnuz ? fnuz_nan(b) : fn_nan(b)) continue;
    if (!fnuz && b == 0x80 && !std::signbit(x)) continue;  // +0 for positive x
    if (!fnuz && b == 0x00 && std::signbit(x)) continue;   // -0 for negative x
    const double d = std::fabs(formula(b, bias) - x);
    if (best < 0 || d < best_d || (d == best_d && (c & 1) == 0 && (best & 1) == 1)) {
      best = c;
      best_d = d;
    }
  }
  // Past the largest finite value by half an ulp or more: NaN. At exactly
  // half an ulp the even code wins: 448 (0x7e) for fn, the missing 0x80 for
  // fnuz, whose largest value 240 is the odd code 0x7f.
  const double a = std::fabs(x);
  if (fnuz ? a >= 248.0 : a > 464.0) return -1;
  return best;
}

TEST(Fp8, DecodesEveryCodeAsTheFormatFormulaSays) {
  for (int c = 0; c < 256; ++c) {
    const auto b = static_cast<uint8_t>(c);
    const float fn = fp8_e4m3fn_to_float(b), fnuz = fp8_e4m3fnuz_to_float(b);
    if (fn_nan(b)) EXPECT_TRUE(std::isnan(fn)) << c;
    else EXPECT_EQ(fn, static_cast<float>(formula(b, 7))) << c;
    if (fnuz_nan(b)) EXPECT_TRUE(std::isnan(fnuz)) << c;
    else EXPECT_EQ(fnuz, static_cast<float>(formula(b, 8))) << c;
    // e5m2 is the top byte of an IEEE half
    float e5 = 0;
    convert_to_float(&b, DType::kF8E5M2, 1, &e5);
    const int e = (c >> 2) & 31, m = c & 3;
    if (e == 31) {
      EXPECT_TRUE(m ? std::isnan(e5) : std::isinf(e5)) << c;
    } else {
      const double mag = e == 0 ? std::ldexp(m / 4.0, -14) : std::ldexp(1.0 + m / 4.0, e - 15);
      EXPECT_EQ(e5, static_cast<float>(c & 0x80 ? -mag : mag)) << c;
    }
  }
  EXPECT_EQ(fp8_e4m3fn_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3fnuz_to_float(0x7f), 240.0f);
  EXPECT_EQ(fp8_e4m3fn_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3fnuz_to_float(0x01), std::ldexp(1.0f, -10));
  EXPECT_TRUE(std::signbit(fp8_e4m3fn_to_float(0x80)));  // -0 exists in fn
}

TEST(Fp8, EncodesToTheNearestCodeTiesToEven) {
  std::mt19937 rng(7);
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 448.0f, 464.0f, 465.0f, 480.0f, 240.0f, 247.0f, 248.0f,
                           std::ldexp(1.0f, -10), std::ldexp(3.0f, -11), std::ldexp(1.0f, -11), 1e-30f, 1e30f};
  // Every midpoint between neighbouring codes (the ties) and both sides of it.
  for (int bias : {7, 8})
    for (int c = 0; c < 126; ++c) {
      const double a = formula(static_cast<uint8_t>(c), bias), b = formula(static_cast<uint8_t>(c + 1), bias);
      const auto mid = static_cast<float>((a + b) / 2);
      for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
        xs.push_back(x);
        xs.push_back(-x);
      }
    }
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-14, 9);
  for (int i = 0; i < 20000; ++i) xs.push_back(std::ldexp(mant(rng), exp(rng)) * (i % 2 ? -1.0f : 1.0f));
  for (float x : xs) {
    const int fn = nearest(x, 7, false);
    const uint8_t got_fn = float_to_fp8_e4m3fn(x);
    if (fn < 0) EXPECT_TRUE(fn_nan(got_fn)) << x;
    else EXPECT_EQ(got_fn, fn) << x;
    const int fnuz = nearest(x, 8, true);
    const uint8_t got_fnuz = float_to_fp8_e4m3fnuz(x);
    if (fnuz < 0) EXPECT_EQ(got_fnuz, 0x80) << x;
    else EXPECT_EQ(got_fnuz, fnuz == 0x80 ? 0 : fnuz) << x;  // no negative zero
  }
  // torch's values: 1.0 is 0x38 in fn and 0x40 in fnuz; NaN and inf give NaN
  EXPECT_EQ(float_to_fp8_e4m3fn(1.0f), 0x38);
  EXPECT_EQ(float_to_fp8_e4m3fnuz(1.0f), 0x40);
  EXPECT_EQ(float_to_fp8_e4m3fn(-2.0f), 0xc0);
  EXPECT_EQ(float_to_fp8_e4m3fn(std::numeric_limits<float>::infinity()), 0x7f);
  EXPECT_EQ(float_to_fp8_e4m3fn(-std::numeric_limits<float>::quiet_NaN()), 0xff);
  EXPECT_EQ(float_to_fp8_e4m3fnuz(std::numeric_limits<float>::quiet_NaN()), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3fnuz(-1e-6f), 0x00);
  // every finite code survives a round trip
  for (int c = 0; c < 256; ++c) {
    const auto b = static_cast<uint8_t>(c);
    if (!fn_nan(b)) {
      EXPECT_EQ(float_to_fp8_e4m3fn(fp8_e4m3fn_to_float(b)), b) << c;
    }
    if (!fnuz_nan(b)) {
      EXPECT_EQ(float_to_fp8_e4m3fnuz(fp8_e4m3fnuz_to_float(b)), b) << c;
    }
  }
}

TEST(Fp8, FnCodesBecomeFnuzCodesOfHalfTheValue) {
  for (int c = 0; c < 256; ++c) {
    const auto b = static_cast<uint8_t>(c);
    const uint8_t z = fp8_e4m3fn_to_fnuz_bits(b);
    if (fn_nan(b)) {
      EXPECT_EQ(z, 0x80) << c;
    } else {
      EXPECT_EQ(2.0f * fp8_e4m3fnuz_to_float(z), fp8_e4m3fn_to_float(b)) << c;  // -0 becomes 0: equal as values
      EXPECT_FALSE(std::isnan(fp8_e4m3fnuz_to_float(z))) << c;
    }
  }
}

TEST(Fp8, NativeFormatFollowsTheArchitecture) {
  EXPECT_EQ(native_fp8_e4m3_format("gfx942:sramecc+:xnack-"), Fp8Format::kE4M3FNUZ);
  EXPECT_EQ(native_fp8_e4m3_format("gfx940"), Fp8Format::kE4M3FNUZ);
  EXPECT_EQ(native_fp8_e4m3_format("gfx941:sramecc+"), Fp8Format::kE4M3FNUZ);
  EXPECT_EQ(native_fp8_e4m3_format("gfx950"), Fp8Format::kE4M3FN);
  EXPECT_EQ(native_fp8_e4m3_format("gfx9420"), Fp8Format::kE4M3FN);  // not a prefix match
  EXPECT_EQ(native_fp8_e4m3_format("gfx90a:sramecc+:xnack-"), Fp8Format::kE4M3FN);
  EXPECT_EQ(native_fp8_e4m3_format("sm_90"), Fp8Format::kE4M3FN);
  EXPECT_STREQ(fp8_format_name(Fp8Format::kE4M3FNUZ), "float8_e4m3fnuz");
}

TEST(Fp8, TensorsConvertToAndFromF8E4M3) {
  Tensor x = Tensor::empty({5}, DType::kF32);
  const float v[5] = {1.0f, -0.3f, 448.0f, 1000.0f, std::ldexp(1.0f, -9)};
  for (int i = 0; i < 5; ++i) x.mutable_data<float>()[i] = v[i];
  Tensor q = x.to(DType::kF8E4M3);
  ASSERT_EQ(q.dtype(), DType::kF8E4M3);
  const auto* bytes = static_cast<const uint8_t*>(q.raw_data());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(bytes[i], float_to_fp8_e4m3fn(v[i])) << i;
  Tensor back = q.to(DType::kF32);
  EXPECT_EQ(back.data<float>()[0], 1.0f);
  EXPECT_EQ(back.data<float>()[1], fp8_e4m3fn_to_float(float_to_fp8_e4m3fn(-0.3f)));
  EXPECT_TRUE(std::isnan(back.data<float>()[3]));  // 1000 is beyond e4m3fn: NaN, as torch gives
  Tensor b16 = q.to(DType::kBF16).to(DType::kF32);
  EXPECT_EQ(b16.data<float>()[2], 448.0f);
  // F8_E5M2 decodes; making it from floats is not supported (one clear error)
  Tensor e5 = Tensor::empty({1}, DType::kF8E5M2);
  static_cast<uint8_t*>(e5.mutable_raw_data())[0] = 0x3c;  // 1.0
  EXPECT_EQ(e5.to(DType::kF32).data<float>()[0], 1.0f);
  EXPECT_THROW(x.to(DType::kF8E5M2), Error);
}

}  // namespace
}  // namespace hipformers
