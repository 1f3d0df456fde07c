// A whole decode step of a small batch (up to kDecodeStepMaxRows sequences,
// one new token each) of a decoder-only model (Qwen3, Qwen2, Llama, Mistral)
// as ONE persistent GPU kernel, from the embedded hidden states to the
// logits of every sequence:
//
//   for each layer:
//     qkv  = rms_norm(h; input_norm) W_qkv^T (+ b)
//     attn = paged sdpa of the q/k-normed, rotated q and k; k and v written
//            into the cache (qkv_rope_paged_attention's decode)
//     h   += attn W_o^T (+ b)                        (proj: the projection)
//     act  = silu(g) * u, g|u = rms_norm(h; post_norm) W_gu^T (+ b)
//     h   += act W_down^T (+ b)                       (branch: the projection)
//   logits = rms_norm(h; final_norm) W_lm^T
//
// Why one kernel: at batch 1 a step of a 0.6B model reads 1.2 GB in ~0.3 ms
// at full bandwidth, but as ~150 dependent kernels of a few microseconds
// each it is bound by their launch, ramp-up and drain. Here every block
// stays resident for the whole step; the phases above are separated by
// grid-wide barriers, and each block asks L2 for the weights of its coming
// phases before it waits at a barrier, so the weight stream does not stop
// at phase boundaries.
//
// Measured on the H200 (Qwen3-0.6B shape, bf16, batch 1): 1.99 ms per step
// against 1.26 for the per-layer kernels with graphs and dependent launches
// (docs/PERFORMANCE.md), so the batched step runs it only when asked
// (StepWorkspace::persistent_decode). Its phases are latency-bound between
// the 141 barriers of a step; that is where it has to get faster first.
//
// Same math and rounding points as the op-by-op step it replaces
// (fused_linear with the norm/SwiGLU/residual folds, and
// qkv_rope_paged_attention), which is its reference: the GEMV and
// attention blocks are the same device code (src/kernels/gpu/gemv.h,
// paged_decode.h); only the K split of a GEMV may differ (the grid differs),
// so results agree to fp32 summation order.
//
// GPU only (bf16 weights, head_dim 64 or 128, hidden sizes that take
// 16-byte vectors); decode_step_supported says whether a model and batch can
// run it, and callers run the op-by-op step otherwise (always on the CPU).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "hipformers/core/tensor.h"
#include "hipformers/kernels/attention.h"
#include "hipformers/kernels/paged_attention.h"

namespace hipformers::kernels {

constexpr int64_t kDecodeStepMaxRows = 8;

// One decoder layer (biases, q_norm, k_norm undefined when absent). qkv is
// the fused [q; k; v] projection, gate_up the fused [gate; up].
struct DecodeLayerWeights {
  Tensor input_norm, qkv, qkv_bias, q_norm, k_norm, o, o_bias;
  Tensor post_norm, gate_up, gate_up_bias, down, down_bias;
  std::optional<int64_t> sliding_window;
};

struct DecodeModelWeights {
  std::vector<DecodeLayerWeights> layers;
  Tensor final_norm, lm_head;
  double eps = 1e-6;
  AttentionSpec attention;  // heads, kv_heads, head_dim, scale, dtype (windows are per layer)
};

// The step's buffers: full-size workspace tensors, [rows, width] views taken
// by the call. hidden holds the embedded tokens on entry and the last
// layer's residual stream on return; logits [rows, vocab].
struct DecodeStepBuffers {
  Tensor hidden, qkv, attn, proj, act, branch, logits;
  Tensor* scratch = nullptr;  // paged attention's split-K scratch (zero-filled once)
};

// Whether `model` can run as a persistent step of `rows` sequences on its
// device (false on the CPU and for unsupported shapes or dtypes).
bool decode_step_supported(const DecodeModelWeights& model, int64_t rows);

// Device state of the persistent step for one model and one paged cache:
// the layer table (the weights' and cache pools' addresses) and the grid
// barrier, uploaded once at construction (not inside a graph capture).
class DecodeStep {
 public:
  DecodeStep(const DecodeModelWeights& model, const std::vector<PagedKVLayer>& cache);
  ~DecodeStep();
  DecodeStep(const DecodeStep&) = delete;
  DecodeStep& operator=(const DecodeStep&) = delete;

  // Whether this was made for `cache` (the pools it writes K/V into).
  bool made_for(const std::vector<PagedKVLayer>& cache) const;
  // Whether a step of `rows` sequences can run (decode_step_supported).
  bool supports_rows(int64_t rows) const;
  // Enqueues the step (one kernel) for the prepared decode `batch` (one token
  // per sequence, decode_step_supported for its size). Only enqueues, so it
  // can be captured in a device graph.
  void run(DecodeStepBuffers& buffers, const PagedBatch& batch, const Tensor& inv_freq,
           float attention_scaling) const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace hipformers::kernels
