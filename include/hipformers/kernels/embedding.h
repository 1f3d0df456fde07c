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
// The same with the ids in a tensor: I32 [N] on the weight's device (a host
// tensor on the CPU), out [N, width]. Also a row gather: `weight` may be any
// [rows, width] tensor, e.g. the hidden states, to pick the last token of each
// sequence before the LM head. On the CPU an id outside [0, rows) is the same
// Error as above. On a GPU the ids stay in device memory (no sync, so the call
// can be captured in a graph): the caller validates them on the host, and an
// out-of-range id yields a row of zeros instead of reading out of bounds.
void embedding(const Tensor& weight, const Tensor& ids, Tensor& out);
void embedding_backward(const Tensor& dout, std::span<const int32_t> ids, Tensor& dweight);

}  // namespace hipformers::kernels
