// The batched forward over the paged KV cache (batch_step.h):
//
//   embed(ids) -> N x [ h += attn(rms_norm(h)); h += mlp(rms_norm(h)) ] -> rms_norm
//   -> gather each sequence's last row -> lm_head -> argmax
//   attn: one GEMM for q|k|v -> q/k norm + RoPE + paged K/V write (one kernel)
//         -> paged attention (split-K in decode, flash prefill otherwise) -> o_proj
//   mlp:  one GEMM for gate|up -> silu(gate) * up (one kernel) -> down_proj
//
// Same math and rounding points as CausalLM::forward (the reference path),
// so fused and unfused runs agree to GEMM accumulation order. All buffers are
// the workspace's: a step enqueues kernels only, which is what lets the
// engine capture a decode step as a graph.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "causal_lm_impl.h"
#include "hipformers/core/error.h"
#include "hipformers/kernels/activation.h"
#include "hipformers/kernels/decode_step.h"
#include "hipformers/kernels/embedding.h"
#include "hipformers/kernels/linear.h"
#include "hipformers/kernels/logits.h"
#include "hipformers/kernels/qkv_rope.h"
#include "hipformers/kernels/rms_norm.h"
#include "hipformers/models/batch_step.h"
#include "hipformers/runtime/allocator.h"

namespace hipformers {
namespace {

constexpr int64_t kIndexAlign = 16;
// Steps of at most this many tokens take the fused small-batch path.
constexpr int64_t kFusedStepMaxTokens = 8;  // I32 elements (64 bytes) between index arrays

int64_t aligned(int64_t n) { return (n + kIndexAlign - 1) / kIndexAlign * kIndexAlign; }

// Where each index array of a step with `tokens` tokens, `seqs` sequences and
// `rows` logit rows sits in the packed index buffer. Depends only on those
// counts, so a graph captured for them reads the right places on replay.
struct IndexLayout {
  int64_t ids, positions, token_seq, query_start, seq_lens, block_table, logit_rows, total;
  IndexLayout(int64_t tokens, int64_t seqs, int64_t pages_per_seq, int64_t rows) {
    ids = 0;
    positions = ids + aligned(tokens);
    token_seq = positions + aligned(tokens);
    query_start = token_seq + aligned(tokens);
    seq_lens = query_start + aligned(seqs + 1);
    block_table = seq_lens + aligned(seqs);
    logit_rows = block_table + aligned(seqs * pages_per_seq);
    total = logit_rows + aligned(rows);
  }
};

Tensor i32_view(const Tensor& index, int64_t offset, const Shape& shape) {
  return Tensor(index.buffer(), shape, DType::kI32, static_cast<std::size_t>(offset) * sizeof(int32_t));
}

}  // namespace

StepWorkspace::StepWorkspace(const CausalLM& model, int64_t max_tokens, int64_t max_seqs, int64_t max_seq_len,
                             bool logits_for_every_token)
    : max_tokens_(max_tokens), max_seqs_(max_seqs), max_seq_len_(max_seq_len), device_(model.device()) {
  const ModelConfig& c = model.config();
  if (max_tokens <= 0 || max_seqs <= 0 || max_seq_len <= 0)
    throw_invalid("a step workspace needs positive max_tokens, max_seqs and max_seq_len");
  if (max_seqs > max_tokens) throw_invalid("max_seqs exceeds max_tokens (every sequence brings a token)");
  if (max_seq_len > c.max_position_embeddings)
    throw_invalid("max_seq_len " + std::to_string(max_seq_len) + " exceeds max_position_embeddings (" +
                  std::to_string(c.max_position_embeddings) + ")");
  max_pages_per_seq_ = PagedKVCache::pages_for(max_seq_len);
  logit_capacity_ = logits_for_every_token ? max_tokens : max_seqs;

  const DType storage = device_.is_gpu() ? model.dtype() : DType::kF32;
  auto make = [&](int64_t rows, int64_t cols) { return empty_tensor(Shape{rows, cols}, storage, device_); };
  const int64_t H = c.hidden_size, D = c.head_dim, nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  const int64_t I = c.intermediate_size;
  const IndexLayout most(max_tokens, max_seqs, max_pages_per_seq_, logit_capacity_);
  index = empty_tensor(Shape{most.total}, DType::kI32, device_);
  for (auto& slot : index_staging)
    slot = std::make_unique<HostStaging>(device_, static_cast<std::size_t>(most.total) * sizeof(int32_t));
  inv_freq = empty_tensor(Shape{D / 2}, DType::kF32, device_);
  hidden = make(max_tokens, H);
  normed = make(max_tokens, H);
  qkv = make(max_tokens, (nh + 2 * nkv) * D);
  q = make(max_tokens, nh * D);
  attn = make(max_tokens, nh * D);
  proj = make(max_tokens, H);
  gate_up = make(max_tokens, 2 * I);
  act = make(max_tokens, I);
  branch = make(max_tokens, H);
  last = make(logit_capacity_, H);
  logits = make(logit_capacity_, c.vocab_size);
  next = empty_tensor(Shape{logit_capacity_}, DType::kI32, device_);

  // Split-K scratch for decode steps.
  kernels::AttentionSpec spec;
  spec.heads = nh;
  spec.kv_heads = nkv;
  spec.head_dim = D;
  spec.dtype = model.dtype();
  // One scratch for every decode batch size this workspace allows (a graph
  // per size replays over it).
  const int64_t scratch_elems = kernels::paged_attention_shared_scratch_elems(max_seqs, max_seq_len, spec, device_);
  auto zeroed = [&](int64_t elems) {
    Tensor t = empty_tensor(Shape{elems}, DType::kF32, device_);
    const std::vector<float> zeros(static_cast<std::size_t>(elems), 0.0f);
    copy_bytes(t.mutable_raw_data(), device_, zeros.data(), Device::cpu(), zeros.size() * sizeof(float));
    return t;
  };
  if (scratch_elems > 0) scratch = zeroed(scratch_elems);  // it holds the split merge counters (paged_attention.h)
  // The persistent one-sequence decode step's counters and split partials
  // (zero-filled likewise; each step leaves its counters zero).
  const int64_t step_elems =
      model.dtype() == DType::kBF16 ? kernels::decode_step_scratch_elems(c.num_hidden_layers, nkv, nh, D, max_seq_len, device_) : 0;
  if (step_elems > 0) step_scratch = zeroed(step_elems);
}

Tensor StepWorkspace::logits_host() const {
  Tensor rows = logits.slice_rows(0, logit_rows_).to(Device::cpu());
  return rows.dtype() == DType::kF32 ? rows : rows.to(DType::kF32);
}

std::vector<float> StepWorkspace::logits_row_host(int64_t row) const {
  if (row < 0 || row >= logit_rows_) throw_invalid("logits row " + std::to_string(row) + " out of range");
  Tensor one = logits.slice_rows(row, row + 1).to(Device::cpu());
  if (one.dtype() != DType::kF32) one = one.to(DType::kF32);
  const float* p = one.data<float>();
  return std::vector<float>(p, p + one.numel());
}

std::vector<int32_t> StepWorkspace::next_ids() const {
  Tensor ids_host = next.slice_rows(0, logit_rows_).to(Device::cpu());
  const int32_t* p = ids_host.data<int32_t>();
  return std::vector<int32_t>(p, p + logit_rows_);
}

bool CausalLM::supports_batched_steps() const { return !impl_->kernels.eager_attention(); }

void CausalLM::prepare_step(StepWorkspace& ws, const PagedKVCache& cache, std::span<const SequenceStep> steps,
                            bool all_logits) const {
  const Impl& m = *impl_;
  const ModelConfig& c = m.config;
  if (!supports_batched_steps())
    throw_error(ErrorKind::kUnsupported, "the batched path does not run eager attention (use forward())");
  if (!(ws.device_ == m.device)) throw_invalid("the step workspace is on another device than the model");
  if (cache.layers.size() != m.layers.size() || !(cache.layers[0].k.device() == m.device))
    throw_invalid("the paged KV cache was made for another model or device");
  const auto B = static_cast<int64_t>(steps.size());
  if (B == 0) throw_invalid("a step needs at least one sequence");
  if (B > ws.max_seqs_)
    throw_invalid("step of " + std::to_string(B) + " sequences exceeds the workspace's " +
                  std::to_string(ws.max_seqs_));
  int64_t N = 0, max_query = 0, max_end = 0;
  for (std::size_t b = 0; b < steps.size(); ++b) {
    const SequenceStep& s = steps[b];
    const auto n = static_cast<int64_t>(s.tokens.size());
    const std::string which = "sequence " + std::to_string(b);
    if (n == 0) throw_invalid(which + " brings no tokens");
    if (s.start < 0) throw_invalid(which + " starts at a negative position");
    const int64_t end = s.start + n;
    if (end > c.max_position_embeddings)
      throw_invalid("sequence of " + std::to_string(end) + " tokens is longer than max_position_embeddings (" +
                    std::to_string(c.max_position_embeddings) + ")");
    if (end > ws.max_seq_len_)
      throw_invalid(which + " reaches " + std::to_string(end) + " tokens, beyond the workspace's " +
                    std::to_string(ws.max_seq_len_));
    const int64_t pages = PagedKVCache::pages_for(end);
    if (static_cast<int64_t>(s.pages.size()) < pages)
      throw_invalid(which + " needs " + std::to_string(pages) + " KV pages, has " + std::to_string(s.pages.size()));
    for (int64_t p = 0; p < pages; ++p) {
      const int32_t page = s.pages[static_cast<std::size_t>(p)];
      if (page < 0 || page >= cache.num_pages())
        throw_invalid(which + ": KV page " + std::to_string(page) + " out of range");
    }
    for (std::size_t t = 0; t < s.tokens.size(); ++t)
      if (s.tokens[t] < 0 || s.tokens[t] >= c.vocab_size)
        throw_invalid("token id " + std::to_string(s.tokens[t]) + " at position " + std::to_string(t) +
                      " is out of range for the model's vocabulary of " + std::to_string(c.vocab_size));
    N += n;
    max_query = std::max(max_query, n);
    max_end = std::max(max_end, end);
  }
  ws.longest_context_ = max_end;
  if (N > ws.max_tokens_)
    throw_invalid("step of " + std::to_string(N) + " tokens exceeds the workspace's " +
                  std::to_string(ws.max_tokens_));
  const int64_t rows = all_logits ? N : B;
  if (rows > ws.logit_capacity_)
    throw_invalid("the step workspace keeps logits for " + std::to_string(ws.logit_capacity_) + " rows, " +
                  std::to_string(rows) + " asked");

  const int64_t P = ws.max_pages_per_seq_;
  const IndexLayout at(N, B, P, rows);
  // The slot the previous step did not use (its upload may still be
  // queued); this slot's own upload, two steps ago, is waited for.
  HostStaging& staging = *ws.index_staging[static_cast<std::size_t>(ws.index_slot)];
  ws.index_slot = 1 - ws.index_slot;
  staging.wait();
  std::span<int32_t> h(static_cast<int32_t*>(staging.data()), static_cast<std::size_t>(at.total));
  std::fill(h.begin(), h.end(), 0);
  int64_t t = 0;
  h[static_cast<std::size_t>(at.query_start)] = 0;
  for (int64_t b = 0; b < B; ++b) {
    const SequenceStep& s = steps[static_cast<std::size_t>(b)];
    const auto n = static_cast<int64_t>(s.tokens.size());
    for (int64_t i = 0; i < n; ++i, ++t) {
      h[static_cast<std::size_t>(at.ids + t)] = s.tokens[static_cast<std::size_t>(i)];
      h[static_cast<std::size_t>(at.positions + t)] = static_cast<int32_t>(s.start + i);
      h[static_cast<std::size_t>(at.token_seq + t)] = static_cast<int32_t>(b);
      if (all_logits) h[static_cast<std::size_t>(at.logit_rows + t)] = static_cast<int32_t>(t);
    }
    if (!all_logits) h[static_cast<std::size_t>(at.logit_rows + b)] = static_cast<int32_t>(t - 1);
    h[static_cast<std::size_t>(at.query_start + b + 1)] = static_cast<int32_t>(t);
    h[static_cast<std::size_t>(at.seq_lens + b)] = static_cast<int32_t>(s.start + n);
    const int64_t pages = std::min<int64_t>(static_cast<int64_t>(s.pages.size()), P);
    for (int64_t p = 0; p < pages; ++p)
      h[static_cast<std::size_t>(at.block_table + b * P + p)] = s.pages[static_cast<std::size_t>(p)];
  }
  staging.upload(ws.index.mutable_raw_data(), static_cast<std::size_t>(at.total) * sizeof(int32_t));

  // RoPE frequencies (dynamic NTK ones change with the longest sequence).
  const kernels::RopeFrequencies freqs = m.frequencies_for(max_end);
  ws.attention_scaling = freqs.attention_scaling;
  if (freqs.inv_freq != ws.host_inv_freq) {
    ws.host_inv_freq = freqs.inv_freq;
    copy_bytes(ws.inv_freq.mutable_raw_data(), ws.device_, freqs.inv_freq.data(), Device::cpu(),
               freqs.inv_freq.size() * sizeof(float));
  }

  kernels::PagedBatch& batch = ws.batch;
  batch.num_seqs = B;
  batch.num_tokens = N;
  batch.max_query_len = max_query;
  batch.max_seq_len = ws.max_seq_len_;  // the bound, so a captured decode graph stays valid as sequences grow
  batch.query_start = i32_view(ws.index, at.query_start, Shape{B + 1});
  batch.seq_lens = i32_view(ws.index, at.seq_lens, Shape{B});
  batch.positions = i32_view(ws.index, at.positions, Shape{N});
  batch.token_seq = i32_view(ws.index, at.token_seq, Shape{N});
  batch.block_table = i32_view(ws.index, at.block_table, Shape{B, P});
  ws.ids = i32_view(ws.index, at.ids, Shape{N});
  ws.logit_rows_index = i32_view(ws.index, at.logit_rows, Shape{rows});
  ws.logit_rows_ = rows;
}

// One sequence, one token: the whole step as one persistent kernel where the
// model and device allow (kernels/decode_step.h); false when they do not
// (Error(kUnsupported) saying why when `required`).
// Its math is that of the folded small-batch path below (rms_norm and SwiGLU
// in the projections); it always computes the argmax too.
bool CausalLM::persistent_step(StepWorkspace& ws, PagedKVCache& cache, bool ids_from_argmax, bool required) const {
  const Impl& m = *impl_;
  auto unsupported = [&](const std::string& why) {
    if (required) throw_error(ErrorKind::kUnsupported, "persistent decode step (HIPFORMERS_PERSISTENT_DECODE=require): " + why);
    return false;
  };
  const ModelConfig& c = m.config;
  kernels::DecodeStepArgs a;
  a.layers.reserve(m.layers.size());
  for (std::size_t li = 0; li < m.layers.size(); ++li) {
    const DecoderLayer& L = m.layers[li];
    if (L.qkv_bias.defined() || L.o_bias.defined() || L.gate_up_bias.defined() || L.down_bias.defined())
      return unsupported("projection biases");
    if (L.sliding_window) return unsupported("sliding-window attention");
    kernels::DecodeStepLayer s;
    s.input_norm = &L.input_norm;
    s.qkv_proj = &L.qkv_proj;
    s.q_norm = &L.q_norm;
    s.k_norm = &L.k_norm;
    s.o_proj = &L.o_proj;
    s.post_attention_norm = &L.post_attention_norm;
    s.gate_up_proj = &L.gate_up_proj;
    s.down_proj = &L.down_proj;
    s.cache = &cache.layers[li];
    a.layers.push_back(s);
  }
  a.embed_tokens = &m.embed_tokens;
  a.final_norm = &m.final_norm;
  a.lm_head = &m.lm_head;
  a.heads = c.num_attention_heads;
  a.kv_heads = c.num_key_value_heads;
  a.head_dim = c.head_dim;
  a.eps = c.rms_norm_eps;
  a.inv_freq = &ws.inv_freq;
  a.rope_scaling = ws.attention_scaling;
  Tensor ids = ids_from_argmax ? ws.next.slice_rows(0, 1) : ws.ids;
  a.ids = &ids;
  a.batch = &ws.batch;
  a.hidden = &ws.hidden;
  a.qkv = &ws.qkv;
  a.act = &ws.act;
  a.logits = &ws.logits;
  a.next = &ws.next;
  a.scratch = &ws.step_scratch;
  std::string why;
  return kernels::decode_step(a, &why) || unsupported(why);
}

bool CausalLM::takes_persistent_step(const StepWorkspace& ws) const {
  if (ws.batch.num_tokens != 1 || ws.logit_rows_ != 1) return false;
  switch (kernels::persistent_decode_mode()) {
    case kernels::PersistentDecode::kOff:
      return false;
    case kernels::PersistentDecode::kShort:
      return ws.longest_context_ <= kernels::decode_step_whole_head_keys(impl_->device);
    default:
      return true;
  }
}

void CausalLM::forward_step(StepWorkspace& ws, PagedKVCache& cache, bool argmax, bool ids_from_argmax) const {
  const Impl& m = *impl_;
  const ModelConfig& c = m.config;
  const kernels::KernelSelection& K = m.kernels;
  const DType dt = m.dtype;
  const int64_t N = ws.batch.num_tokens, R = ws.logit_rows_;
  if (N == 0) throw_invalid("forward_step: no step was prepared");
  const double eps = c.rms_norm_eps;
  const float rope_scaling = ws.attention_scaling;

  kernels::AttentionSpec spec;
  spec.heads = c.num_attention_heads;
  spec.kv_heads = c.num_key_value_heads;
  spec.head_dim = c.head_dim;
  spec.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  spec.dtype = dt;
  spec.hopper_kernels = m.attention_backend.name == "flash_attention_3";
  spec.split_decode = K.kernel(kernels::LayerKind::kAttention).name == "attention_paged_split";
  spec.rope_in_attention = K.kernel(kernels::LayerKind::kRotaryEmbedding).name != "rotary_qkv_write";

  Tensor hidden = ws.hidden.slice_rows(0, N), normed = ws.normed.slice_rows(0, N);
  Tensor qkv = ws.qkv.slice_rows(0, N), q = ws.q.slice_rows(0, N), attn = ws.attn.slice_rows(0, N);
  Tensor proj = ws.proj.slice_rows(0, N), gate_up = ws.gate_up.slice_rows(0, N), act = ws.act.slice_rows(0, N);
  Tensor branch = ws.branch.slice_rows(0, N);
  Tensor* scratch = ws.scratch.defined() ? &ws.scratch : nullptr;

  if (ids_from_argmax && N != ws.batch.num_seqs)
    throw_invalid("forward_step: ids from the previous argmax need one token per sequence");
  if (takes_persistent_step(ws) &&
      persistent_step(ws, cache, ids_from_argmax,
                      kernels::persistent_decode_mode() == kernels::PersistentDecode::kRequire))
    return;
  kernels::embedding(m.embed_tokens, ids_from_argmax ? ws.next.slice_rows(0, N) : ws.ids, hidden);
  Tensor last = ws.last.slice_rows(0, R), logits = ws.logits.slice_rows(0, R);

  // Small batches (decode) may fold the norms and the SwiGLU into the
  // projections (fused_linear): RMSNorm by every block of the next GEMV with
  // the residual add in the previous GEMV's epilogue, silu(gate) * up in the
  // gate|up GEMV's epilogue. Chosen per device through the registry
  // (rms_norm_in_projection, silu_and_mul_in_projection: not the defaults;
  // docs/KERNELS.md, docs/PERFORMANCE.md has the measurements).
  auto fusion = [&](const Tensor* norm, bool swiglu, Tensor* residual) {
    kernels::LinearFusion f;
    f.norm_weight = norm;
    f.eps = eps;
    f.swiglu_output = swiglu;
    f.residual = residual;
    return f;
  };
  const DecoderLayer& L0 = m.layers[0];
  const bool small = N <= kFusedStepMaxTokens;
  const bool fold_norm = small && K.kernel(kernels::LayerKind::kRMSNorm).name == "rms_norm_in_projection" &&
                         kernels::fused_linear_supported(hidden, L0.qkv_proj, fusion(&L0.input_norm, false, nullptr)) &&
                         kernels::fused_linear_supported(hidden, L0.gate_up_proj, fusion(&L0.post_attention_norm, false, nullptr)) &&
                         kernels::fused_linear_supported(last, m.lm_head, fusion(&m.final_norm, false, nullptr));
  const bool fold_silu = small && K.kernel(kernels::LayerKind::kSiLUAndMul).name == "silu_and_mul_in_projection" &&
                         kernels::fused_linear_supported(hidden, L0.gate_up_proj, fusion(nullptr, true, nullptr));
  for (std::size_t li = 0; li < m.layers.size(); ++li) {
    const DecoderLayer& L = m.layers[li];
    if (fold_norm) {  // the residual stream already holds the previous layer's output
      kernels::fused_linear(hidden, L.qkv_proj, L.qkv_bias, dt, fusion(&L.input_norm, false, nullptr), qkv);
    } else {
      K.rms_norm(li == 0 ? nullptr : &branch, hidden, L.input_norm, eps, dt, normed, nullptr);
      kernels::linear(normed, L.qkv_proj, L.qkv_bias, dt, qkv);
    }
    spec.sliding_window = L.sliding_window;
    kernels::qkv_rope_paged_attention(qkv, L.q_norm, L.k_norm, eps, ws.inv_freq, rope_scaling, ws.batch, spec,
                                      cache.layers[li], q, attn, scratch);
    if (fold_norm) {
      kernels::fused_linear(attn, L.o_proj, L.o_bias, dt, fusion(nullptr, false, &hidden), proj);
    } else {
      kernels::linear(attn, L.o_proj, L.o_bias, dt, proj);
      K.rms_norm(&proj, hidden, L.post_attention_norm, eps, dt, normed, nullptr);
    }
    const Tensor& mlp_input = fold_norm ? hidden : normed;
    if (fold_norm || fold_silu)
      kernels::fused_linear(mlp_input, L.gate_up_proj, L.gate_up_bias, dt,
                            fusion(fold_norm ? &L.post_attention_norm : nullptr, fold_silu, nullptr),
                            fold_silu ? act : gate_up);
    else
      kernels::linear(mlp_input, L.gate_up_proj, L.gate_up_bias, dt, gate_up);
    if (!fold_silu) kernels::silu_and_mul_packed(gate_up, dt, act);
    if (fold_norm)  // else the next add_rms_norm adds `branch`
      kernels::fused_linear(act, L.down_proj, L.down_bias, dt, fusion(nullptr, false, &hidden), branch);
    else
      kernels::linear(act, L.down_proj, L.down_bias, dt, branch);
  }
  if (fold_norm) {
    kernels::embedding(hidden, ws.logit_rows_index, last);  // gather the rows that need logits
    kernels::fused_linear(last, m.lm_head, Tensor(), dt, fusion(&m.final_norm, false, nullptr), logits);
  } else {
    K.rms_norm(&branch, hidden, m.final_norm, eps, dt, normed, nullptr);
    kernels::embedding(normed, ws.logit_rows_index, last);
    kernels::linear(last, m.lm_head, Tensor(), dt, logits);
  }
  if (argmax) {
    Tensor next = ws.next.slice_rows(0, R);
    kernels::argmax_rows(logits, next);
  }
}

}  // namespace hipformers
