// Small host helpers on one row of logits (generation runs them per step).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hipformers::kernels {

// Numerically stable softmax in fp64 accumulation, written to `out` (may alias).
void softmax(std::span<const float> logits, std::span<float> out);
// Index of the largest value; the first one on ties (torch.argmax). -inf rows give 0.
int64_t argmax(std::span<const float> values);
// Indices of the k largest values, largest first; ties keep the lower index first.
std::vector<int64_t> top_k(std::span<const float> values, int64_t k);

}  // namespace hipformers::kernels
