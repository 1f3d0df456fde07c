// The whole decode step of ONE sequence (one new token) as one persistent
// kernel: every projection, the attention over the paged KV cache, the
// lm_head and the argmax, for every layer, in a single launch.
//
// Why. A batch-1 step is ~1.2 GB of weights read once. Run as a chain of
// ~225 short kernels, three quarters of its time is the chain itself: each
// kernel's blocks start late and stop early (docs/PERFORMANCE.md). Here one
// block per SM stays resident for the whole step; a producer thread streams
// the block's weight tiles into a ring of shared-memory stages, running
// ahead across op boundaries (weights depend on nothing), while the
// consumer warps wait for the op before to finish (a grid-wide counter per
// op) and compute from shared memory.
//
// Math: that of CausalLM::forward_step's small-batch path with the norms and
// SwiGLU folded into the projections (rms_norm_in_projection,
// silu_and_mul_in_projection): the same rounding points, other summation
// orders (GEMV sums on the tensor cores, fp32, by blocks of 32 inputs;
// attention by warp or page), so results agree with the
// per-kernel path to bf16 rounding, not bit for bit.
//
// Scope: CUDA sm_90 builds only (bulk copies into shared memory and
// mbarriers); bf16 weights; Qwen3/Llama-shaped layers without biases or
// sliding windows; head_dim 64 or 128. decode_step_supported() says whether
// a model and step qualify; the caller falls back to the per-kernel path
// (which is what HIP builds always run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hipformers/core/tensor.h"
#include "hipformers/kernels/paged_attention.h"

namespace hipformers::kernels {

// One decoder layer's weights (bf16, on the GPU).
struct DecodeStepLayer {
  const Tensor* input_norm = nullptr;           // [H]
  const Tensor* qkv_proj = nullptr;             // [(heads + 2 kv_heads) D, H]
  const Tensor* q_norm = nullptr;               // [D] or undefined (no q/k norm)
  const Tensor* k_norm = nullptr;               // [D] or undefined
  const Tensor* o_proj = nullptr;               // [H, heads D]
  const Tensor* post_attention_norm = nullptr;  // [H]
  const Tensor* gate_up_proj = nullptr;         // [2 I, H]: gate rows, then up rows
  const Tensor* down_proj = nullptr;            // [H, I]
  const PagedKVLayer* cache = nullptr;
};

struct DecodeStepArgs {
  std::vector<DecodeStepLayer> layers;
  const Tensor* embed_tokens = nullptr;  // [V, H]
  const Tensor* final_norm = nullptr;    // [H]
  const Tensor* lm_head = nullptr;       // [V, H]
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  double eps = 1e-6;
  const Tensor* inv_freq = nullptr;  // F32 [head_dim / 2]
  float rope_scaling = 1.0f;
  const Tensor* ids = nullptr;  // I32 [>= 1]: the token to embed is ids[0]
  const PagedBatch* batch = nullptr;  // one sequence, one token; its seq_lens/block_table are read on the device
  // Outputs and buffers (bf16 unless said): hidden [>= 1, H] (the residual
  // stream), qkv [>= 1, (heads + 2 kv_heads) D], act [>= 1, I],
  // logits [>= 1, V], next I32 [>= 1] (argmax of the logits). With the
  // flagged exchange (the default; not with HIPFORMERS_PERSISTENT_EXCHANGE=
  // counters) the ops hand their values on through the scratch instead, and
  // hidden, qkv and act are left as they were.
  Tensor *hidden = nullptr, *qkv = nullptr, *act = nullptr, *logits = nullptr, *next = nullptr;
  // F32, decode_step_scratch_elems() elements, zero-filled before its first
  // use; every step leaves its counters zero again but for a count of the
  // steps run (graph replays reuse it).
  Tensor* scratch = nullptr;
};

// F32 elements of scratch for a model of n_layers layers and sequences of up
// to max_seq_len tokens (0 where the persistent step does not exist: CPU,
// HIP and pre-sm_90 builds have none).
int64_t decode_step_scratch_elems(int64_t n_layers, int64_t kv_heads, int64_t heads, int64_t head_dim,
                                  int64_t max_seq_len, const Device& device);

// Whether decode_step() can run this step; else `why` (if given) says why not.
// decode_step() asks it itself.
bool decode_step_supported(const DecodeStepArgs& args, DType dtype, std::string* why = nullptr);

// Enqueues the step (one cooperative launch; no sync, no allocation: graph
// capturable) and returns true; where decode_step_supported() says no,
// enqueues nothing and returns false, with the reason in `why` if given.
bool decode_step(const DecodeStepArgs& args, std::string* why = nullptr);

// HIPFORMERS_PERSISTENT_DECODE: unset, "short" or anything not below: the
// persistent step for a one-sequence decode step while its attention runs
// as whole heads (a context of up to decode_step_whole_head_keys() tokens),
// the per-kernel step past that (longer contexts take split attention items
// in the persistent step, slower than the per-kernel step at 1000 tokens:
// docs/PERFORMANCE.md); "1": the persistent step wherever supported, at any
// length; "require": as "1", and a one-sequence decode step that cannot take
// it is an error that says why (tests, benchmarks); "0": never. Read at
// every call.
enum class PersistentDecode { kOff, kShort, kAuto, kRequire };
PersistentDecode persistent_decode_mode();

// The longest context (this step's token included) whose attention the
// persistent step runs as whole heads on `device`; 0 where it has no
// persistent step.
int64_t decode_step_whole_head_keys(const Device& device);

}  // namespace hipformers::kernels
