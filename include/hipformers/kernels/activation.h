// SwiGLU's gate: out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
// With a bf16/f16 `dtype`, silu(g) is rounded, then the product (torch runs
// act_fn(gate_proj(x)) * up_proj(x) as two bf16 ops).
// Backward: dgate = dout * up * sig(g) * (1 + g * (1 - sig(g)));  dup = dout * silu(g).
#pragma once

#include "hipformers/core/tensor.h"

namespace hipformers::kernels {

// gate, up, out: same shape; out may alias gate or up.
void silu_and_mul(const Tensor& gate, const Tensor& up, DType dtype, Tensor& out);
void silu_and_mul_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup);
// The same on the fused gate|up projection output: gate_up [N, 2I], each row
// gate (I values) then up (I values); out [N, I]. Rounds exactly as
// silu_and_mul on the two halves. Enqueues GPU work only (graph-capturable).
void silu_and_mul_packed(const Tensor& gate_up, DType dtype, Tensor& out);

}  // namespace hipformers::kernels
