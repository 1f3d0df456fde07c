#include "hipformers/generation/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_set>
#include <vector>

#include "hipformers/core/error.h"
#include "hipformers/kernels/logits.h"

namespace hipformers {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}

void validate(const SamplingParams& p) {
  if (!(p.temperature > 0) || !std::isfinite(p.temperature))
    throw_invalid("temperature must be a positive number, got " + std::to_string(p.temperature));
  if (p.top_k < 0) throw_invalid("top_k must be >= 0, got " + std::to_string(p.top_k));
  if (!(p.top_p > 0 && p.top_p <= 1)) throw_invalid("top_p must be in (0, 1], got " + std::to_string(p.top_p));
  if (!(p.min_p >= 0 && p.min_p <= 1)) throw_invalid("min_p must be in [0, 1], got " + std::to_string(p.min_p));
  if (!(p.repetition_penalty > 0) || !std::isfinite(p.repetition_penalty))
    throw_invalid("repetition_penalty must be a positive number, got " + std::to_string(p.repetition_penalty));
}

void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> context, double penalty) {
  if (penalty == 1.0) return;
  std::unordered_set<int32_t> seen;
  for (int32_t id : context) {
    if (id < 0 || static_cast<std::size_t>(id) >= logits.size() || !seen.insert(id).second) continue;
    float& v = logits[static_cast<std::size_t>(id)];
    v = v < 0 ? static_cast<float>(v * penalty) : static_cast<float>(v / penalty);
  }
}

void apply_temperature(std::span<float> logits, double temperature) {
  if (temperature == 1.0) return;
  for (float& v : logits) v = static_cast<float>(v / temperature);
}

void apply_top_k(std::span<float> logits, int64_t top_k) {
  if (top_k <= 0 || static_cast<std::size_t>(top_k) >= logits.size()) return;
  std::vector<float> sorted(logits.begin(), logits.end());
  std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<float>());
  const float kth = sorted[static_cast<std::size_t>(top_k - 1)];
  for (float& v : logits)
    if (v < kth) v = kNegInf;
}

void apply_top_p(std::span<float> logits, double top_p) {
  if (top_p >= 1.0 || logits.empty()) return;
  std::vector<float> probs(logits.size());
  kernels::softmax(logits, probs);
  // Ascending order (stable, like torch.sort on CPU); the tail sums to 1.
  std::vector<std::size_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logits[a] < logits[b]; });
  float cumulative = 0;  // fp32, as torch's cumsum of fp32 probabilities
  for (std::size_t r = 0; r + 1 < order.size(); ++r) {  // the last (most likely) is always kept
    cumulative += probs[order[r]];
    if (cumulative <= static_cast<float>(1.0 - top_p)) logits[order[r]] = kNegInf;
  }
}

void apply_min_p(std::span<float> logits, double min_p) {
  if (min_p <= 0.0 || logits.empty()) return;
  std::vector<float> probs(logits.size());
  kernels::softmax(logits, probs);
  const float top = *std::max_element(probs.begin(), probs.end());
  const float threshold = static_cast<float>(min_p) * top;
  const int64_t best = kernels::argmax(logits);  // always kept
  for (std::size_t i = 0; i < logits.size(); ++i)
    if (probs[i] < threshold && static_cast<int64_t>(i) != best) logits[i] = kNegInf;
}

int32_t select_next_token(std::span<float> logits, std::span<const int32_t> context, const SamplingParams& params,
                          std::mt19937_64& rng) {
  apply_repetition_penalty(logits, context, params.repetition_penalty);
  if (!params.do_sample) return static_cast<int32_t>(kernels::argmax(logits));
  apply_temperature(logits, params.temperature);
  apply_top_k(logits, params.top_k);
  apply_top_p(logits, params.top_p);
  apply_min_p(logits, params.min_p);
  std::vector<float> probs(logits.size());
  kernels::softmax(logits, probs);
  // Inverse-CDF draw in fp64 from a 53-bit uniform: reproducible for a seed
  // on every platform (std:: distributions are not specified bit-exactly).
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  double cumulative = 0;
  int32_t last_valid = 0;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    last_valid = static_cast<int32_t>(i);
    cumulative += probs[i];
    if (u < cumulative) return static_cast<int32_t>(i);
  }
  return last_valid;  // u landed in the rounding slack at the top
}

}  // namespace hipformers
