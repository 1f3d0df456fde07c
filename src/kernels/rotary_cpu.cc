#include <algorithm>
#include <cmath>
#include <numbers>

#include "backend.h"

namespace hipformers::kernels {

// Frequencies are host math, the same for every backend; they mirror
// transformers.modeling_rope_utils (fp32 tensors computed from Python floats).
RopeFrequencies rope_frequencies(const RopeSpec& spec, int64_t seq_len) {
  const int64_t dim = spec.head_dim;
  const int64_t half = dim / 2;
  double base = spec.theta;
  if (spec.kind == RopeSpec::kDynamic) {
    // NTK-aware: the base grows with the sequence beyond the trained length.
    const double max_pos = static_cast<double>(spec.max_position_embeddings);
    const double len = std::max(static_cast<double>(seq_len), max_pos);
    base = base * std::pow(spec.factor * len / max_pos - (spec.factor - 1.0),
                           static_cast<double>(dim) / static_cast<double>(dim - 2));
  }
  // torch: base ** (arange(0, dim, 2).float() / dim), in fp32.
  std::vector<float> pos_freqs(static_cast<std::size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    pos_freqs[static_cast<std::size_t>(i)] = static_cast<float>(std::pow(base, static_cast<double>(exponent)));
  }
  RopeFrequencies out;
  out.inv_freq.resize(static_cast<std::size_t>(half));
  for (int64_t i = 0; i < half; ++i) out.inv_freq[static_cast<std::size_t>(i)] = 1.0f / pos_freqs[static_cast<std::size_t>(i)];

  switch (spec.kind) {
    case RopeSpec::kDefault:
    case RopeSpec::kDynamic:
      break;
    case RopeSpec::kLinear:
      for (float& f : out.inv_freq) f = static_cast<float>(f / spec.factor);
      break;
    case RopeSpec::kLlama3: {
      // Long wavelengths are divided by factor, short ones kept, the band
      // between interpolated smoothly.
      const double old_len = static_cast<double>(spec.original_max_position_embeddings);
      const double low_wavelen = old_len / spec.low_freq_factor;
      const double high_wavelen = old_len / spec.high_freq_factor;
      for (float& f : out.inv_freq) {
        const float wavelen = static_cast<float>(2 * std::numbers::pi) / f;
        float scaled = wavelen > low_wavelen ? static_cast<float>(f / spec.factor) : f;
        const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        if (medium) {
          const float smooth = static_cast<float>((old_len / wavelen - spec.low_freq_factor) /
                                                  (spec.high_freq_factor - spec.low_freq_factor));
          scaled = (1.0f - smooth) * static_cast<float>(scaled / spec.factor) + smooth * scaled;
        }
        f = scaled;
      }
      break;
    }
    case RopeSpec::kYarn: {
      // Dimensions rotating fewer than beta_slow times over the original
      // context are interpolated (divided by factor), more than beta_fast
      // times extrapolated (kept), with a linear ramp between.
      const double orig = static_cast<double>(spec.original_max_position_embeddings);
      auto correction_dim = [&](double rotations) {
        return (static_cast<double>(dim) * std::log(orig / (rotations * 2 * std::numbers::pi))) / (2 * std::log(base));
      };
      double low = correction_dim(spec.beta_fast);
      double high = correction_dim(spec.beta_slow);
      if (spec.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(dim - 1));
      if (low == high) high += 0.001;  // avoid a zero-width ramp
      for (int64_t i = 0; i < half; ++i) {
        const float ramp = std::clamp(static_cast<float>((static_cast<float>(i) - low) / (high - low)), 0.0f, 1.0f);
        const float extrapolation_factor = 1.0f - ramp;
        const float extrapolated = 1.0f / pos_freqs[static_cast<std::size_t>(i)];
        const float interpolated =
            1.0f / (static_cast<float>(spec.factor) * pos_freqs[static_cast<std::size_t>(i)]);
        out.inv_freq[static_cast<std::size_t>(i)] =
            interpolated * (1.0f - extrapolation_factor) + extrapolated * extrapolation_factor;
      }
      out.attention_scaling = static_cast<float>(spec.yarn_attention_factor);
      break;
    }
  }
  return out;
}

namespace cpu {

void apply_rope(Tensor& x, int64_t heads, std::span<const int64_t> positions, const RopeFrequencies& freqs,
                DType dtype, bool inverse) {
  const auto half = static_cast<int64_t>(freqs.inv_freq.size());
  const int64_t dim = 2 * half;
  const auto T = static_cast<int64_t>(positions.size());
  float* data = x.mutable_data<float>();
  const float sign = inverse ? -1.0f : 1.0f;
#pragma omp parallel for if (T > 1)
  for (int64_t t = 0; t < T; ++t) {
    // torch: freqs = inv_freq (fp32) x position (fp32), cos/sin in fp32 times
    // attention_scaling, then cast to the activation dtype.
    std::vector<float> cos_v(static_cast<std::size_t>(half)), sin_v(static_cast<std::size_t>(half));
    const float pos = static_cast<float>(positions[static_cast<std::size_t>(t)]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = freqs.inv_freq[static_cast<std::size_t>(i)] * pos;
      cos_v[static_cast<std::size_t>(i)] = round_to_dtype(std::cos(angle) * freqs.attention_scaling, dtype);
      sin_v[static_cast<std::size_t>(i)] = sign * round_to_dtype(std::sin(angle) * freqs.attention_scaling, dtype);
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = data + (t * heads + h) * dim;
      for (int64_t i = 0; i < half; ++i) {
        const float c = cos_v[static_cast<std::size_t>(i)], s = sin_v[static_cast<std::size_t>(i)];
        const float a = v[i], b = v[i + half];
        // x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1]
        v[i] = round_to_dtype(round_to_dtype(a * c, dtype) + round_to_dtype(-b * s, dtype), dtype);
        v[i + half] = round_to_dtype(round_to_dtype(b * c, dtype) + round_to_dtype(a * s, dtype), dtype);
      }
    }
  }
}

}  // namespace cpu
}  // namespace hipformers::kernels
