// Token embedding lookup: out[t, :] = weight[ids[t], :].
// Backward scatters: dweight[ids[t], :] += dout[t, :].
#pragma once

#include <cstdint>
#include <span>

#include "hipformers/core/tensor.h"

namespace hipformers::kernels {

// weight [vocab, hidden] F32, out [ids.size(), hidden] F32. An id outside
// [0, vocab) is Error(kInvalidInput) naming the id, its position and the vocab size.
void embedding(const Tensor& weight, std::span<const int32_t> ids, Tensor& out);
void embedding_backward(const Tensor& dout, std::span<const int32_t> ids, Tensor& dweight);

}  // namespace hipformers::kernels
