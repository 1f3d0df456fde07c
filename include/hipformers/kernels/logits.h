// Small host helpers on one row of logits (generation runs them per step),
// and argmax_rows, the tensor op for greedy decoding of a batch on the device.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hipformers/core/tensor.h"

namespace hipformers::kernels {

// Numerically stable softmax in fp64 accumulation, written to `out` (may alias).
void softmax(std::span<const float> logits, std::span<float> out);
// Index of the largest value; the first one on ties (torch.argmax). -inf rows give 0.
int64_t argmax(std::span<const float> values);
// Indices of the k largest values, largest first; ties keep the lower index first.
std::vector<int64_t> top_k(std::span<const float> values, int64_t k);

// ids[b] = argmax(logits[b, :]) for logits [B, V] (V > 0) in the storage dtype
// (F32 on the CPU; F32, BF16 or F16 on a GPU) and ids I32 [B] on the same
// device. Exactly argmax() above for every row: the first index of the
// maximum, a NaN counts as larger than any number (the first NaN wins, as in
// torch.argmax), +0 and -0 are equal, a row of -inf gives 0. On a GPU it
// enqueues work only (graph-capturable); calls on one device must be stream
// ordered (they are: one stream per device), since rows split over several
// blocks combine through a small static device buffer.
void argmax_rows(const Tensor& logits, Tensor& ids);

}  // namespace hipformers::kernels
