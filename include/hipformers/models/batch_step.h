// One batched forward step over the paged KV cache: any mix of sequences,
// each bringing its next tokens (a prompt or a chunk of it in prefill, one
// generated token in decode). All buffers a step touches live in a
// StepWorkspace sized once, so a step only enqueues kernels and a decode
// step can be captured as a device graph and replayed (generation/engine.h).
//
//   model.prepare_step(ws, steps);        // host -> device: ids, positions, pages (one copy,
//                                         // queued; the host waits only when dynamic-NTK
//                                         // frequencies change)
//   model.forward_step(ws, cache, true);  // enqueue: logits of each sequence's last token, argmax
//
// Dynamic-NTK RoPE takes its frequencies from the longest sequence of the
// step (as Transformers does for a padded batch), so with that scaling a
// sequence's keys depend on its batch neighbours once past the original length.
//   ws.next_ids()                         // greedy choices (waits for the step)
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "hipformers/core/tensor.h"
#include "hipformers/kernels/paged_attention.h"
#include "hipformers/runtime/staging.h"

namespace hipformers {

class CausalLM;

// A sequence's part in a step.
struct SequenceStep {
  std::span<const int32_t> tokens;  // new tokens, at positions [start, start + tokens.size())
  int64_t start = 0;                // tokens already in the cache
  std::span<const int32_t> pages;   // the sequence's pages, covering start + tokens.size() positions
};

class StepWorkspace {
 public:
  // Room for steps of up to `max_tokens` tokens from up to `max_seqs`
  // sequences, each at most `max_seq_len` long. With `logits_for_every_token`,
  // logits can be kept for every token (hipformers logits), else one row per
  // sequence.
  StepWorkspace(const CausalLM& model, int64_t max_tokens, int64_t max_seqs, int64_t max_seq_len,
                bool logits_for_every_token = false);

  int64_t max_tokens() const { return max_tokens_; }
  int64_t max_seqs() const { return max_seqs_; }
  int64_t max_seq_len() const { return max_seq_len_; }
  // The prepared step.
  int64_t num_seqs() const { return batch.num_seqs; }
  int64_t num_tokens() const { return batch.num_tokens; }
  int64_t logit_rows() const { return logit_rows_; }
  // The longest sequence of the prepared step, its new tokens included.
  int64_t longest_context() const { return longest_context_; }

  // Logits of the last step [logit_rows, vocab] as F32 on the host (waits).
  Tensor logits_host() const;
  // Row `row` of them only (waits).
  std::vector<float> logits_row_host(int64_t row) const;
  // The argmax of each logits row (forward_step with argmax; waits).
  std::vector<int32_t> next_ids() const;

  // ---- what forward_step reads and writes (device tensors; full-size buffers,
  // views of the current step are taken per call) ----
  kernels::PagedBatch batch;     // views into `index`
  Tensor index;                  // I32: every index array of a step, uploaded in one copy
  Tensor ids, logit_rows_index;  // I32 views into `index`
  Tensor inv_freq;               // F32 [head_dim / 2]
  Tensor hidden, normed, qkv, q, attn, proj, gate_up, act, branch, last, logits, next;
  Tensor scratch;                // paged attention's split-K scratch
  Tensor step_scratch;           // the persistent decode step's (kernels/decode_step.h); undefined without it
  // Page-locked staging for `index`, two in turn: a step's indices are
  // written while the previous step's upload may still be queued.
  std::array<std::unique_ptr<HostStaging>, 2> index_staging;
  int index_slot = 0;
  std::vector<float> host_inv_freq;
  float attention_scaling = 1.0f;  // RoPE's, from the frequencies of the prepared step

 private:
  friend class CausalLM;
  int64_t max_tokens_ = 0, max_seqs_ = 0, max_seq_len_ = 0, max_pages_per_seq_ = 0, logit_capacity_ = 0;
  int64_t logit_rows_ = 0, longest_context_ = 0;
  Device device_;
};

}  // namespace hipformers
