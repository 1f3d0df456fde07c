// Argument checks and device dispatch for paged attention (paged_attention.h),
// in the style of ops.cc: user-reachable mistakes are hipformers::Error here,
// so the CPU reference and the GPU kernels can assume well-formed arguments.
// Values inside the index tensors are checked on the CPU only (on a GPU they
// live in device memory and a check would need a sync, which a captured graph
// cannot have).
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend.h"
#include "hipformers/core/error.h"

namespace hipformers::kernels {
namespace {

constexpr const char* kOp = "paged_attention";

void require(bool ok, const std::string& what) {
  if (!ok) throw_invalid(std::string(kOp) + ": " + what);
}

std::string str(int64_t v) { return std::to_string(v); }

// The shape checks that do not read tensor data; returns the common device.
Device check_shapes(const Tensor& q, const PagedBatch& batch, const PagedKVLayer& cache, const AttentionSpec& spec,
                    const Tensor& out) {
  require(spec.heads > 0 && spec.kv_heads > 0 && spec.head_dim > 0 && spec.heads % spec.kv_heads == 0,
          "heads (" + str(spec.heads) + ") must be a positive multiple of kv_heads (" + str(spec.kv_heads) + ")");
  require(!spec.eager, "eager attention (materialised probabilities) is not supported on a paged cache");
  if (spec.sliding_window) require(*spec.sliding_window > 0, "sliding window must be positive");
  require(batch.num_seqs >= 0 && batch.num_tokens >= 0, "negative num_seqs or num_tokens");

  // Data tensors: one device, one storage dtype (F32 on the CPU).
  require(q.defined() && out.defined() && cache.k.defined() && cache.v.defined(),
          "q, out and the k/v pools must be defined");
  const Device device = q.device();
  for (const Tensor* t : {&out, &cache.k, &cache.v})
    require(t->device() == device,
            "tensors on different devices (" + device.str() + " and " + t->device().str() + ")");
  if (device.is_cpu()) {
    for (const Tensor* t : {&q, &out, &cache.k, &cache.v})
      require(t->dtype() == DType::kF32, std::string("expected F32 tensors on the CPU, got ") + dtype_name(t->dtype()));
  } else {
    const DType d = q.dtype();
    require(d == DType::kF32 || d == DType::kBF16 || d == DType::kF16,
            std::string("expected F32, BF16 or F16 tensors, got ") + dtype_name(d));
    for (const Tensor* t : {&out, &cache.k, &cache.v})
      require(t->dtype() == d, std::string("tensors of different dtypes (") + dtype_name(d) + " and " +
                                   dtype_name(t->dtype()) + ")");
  }

  const int64_t width = spec.heads * spec.head_dim;
  require(q.ndim() >= 1 && q.numel() == batch.num_tokens * width && out.numel() == q.numel(),
          "queries " + q.shape().str() + " / output " + out.shape().str() + " are not [" + str(batch.num_tokens) +
              ", " + str(width) + "]");
  require(cache.k.ndim() == 4 && cache.k.size(1) == spec.kv_heads && cache.k.size(2) == kKVPageSize &&
              cache.k.size(3) == spec.head_dim && cache.v.shape() == cache.k.shape(),
          "pools k " + cache.k.shape().str() + " / v " + cache.v.shape().str() + " are not [num_pages, " +
              str(spec.kv_heads) + ", " + str(kKVPageSize) + ", " + str(spec.head_dim) + "]");

  // Index tensors: I32 on the same device.
  auto index = [&](const Tensor& t, const char* name, bool required) {
    if (!t.defined()) {
      require(!required, std::string(name) + " must be defined");
      return;
    }
    require(t.dtype() == DType::kI32, std::string(name) + " must be I32, not " + dtype_name(t.dtype()));
    require(t.device() == device,
            std::string(name) + " is on " + t.device().str() + ", the queries on " + device.str());
  };
  index(batch.query_start, "query_start", true);
  index(batch.seq_lens, "seq_lens", true);
  index(batch.block_table, "block_table", true);
  index(batch.positions, "positions", false);
  index(batch.token_seq, "token_seq", false);
  require(batch.query_start.numel() == batch.num_seqs + 1,
          "query_start " + batch.query_start.shape().str() + " is not [" + str(batch.num_seqs + 1) + "]");
  require(batch.seq_lens.numel() == batch.num_seqs,
          "seq_lens " + batch.seq_lens.shape().str() + " is not [" + str(batch.num_seqs) + "]");
  if (batch.positions.defined())
    require(batch.positions.numel() == batch.num_tokens,
            "positions " + batch.positions.shape().str() + " is not [" + str(batch.num_tokens) + "]");
  if (batch.token_seq.defined())
    require(batch.token_seq.numel() == batch.num_tokens,
            "token_seq " + batch.token_seq.shape().str() + " is not [" + str(batch.num_tokens) + "]");
  require(batch.block_table.ndim() == 2 && batch.block_table.size(0) == batch.num_seqs,
          "block_table " + batch.block_table.shape().str() + " is not [" + str(batch.num_seqs) +
              ", max_pages_per_seq]");
  if (batch.num_tokens > 0) {
    require(batch.max_query_len >= 1 && batch.max_seq_len >= batch.max_query_len,
            "bounds max_query_len " + str(batch.max_query_len) + " / max_seq_len " + str(batch.max_seq_len) +
                " cannot hold the batch's queries");
    require(batch.max_seq_len <= batch.block_table.size(1) * kKVPageSize,
            "max_seq_len " + str(batch.max_seq_len) + " exceeds the block table's " +
                str(batch.block_table.size(1)) + " pages of " + str(kKVPageSize));
  }
  return device;
}

// CPU only: the values of the index tensors agree with each other and the bounds.
void check_values(const PagedBatch& batch, const PagedKVLayer& cache) {
  const int32_t* qs = batch.query_start.data<int32_t>();
  const int32_t* lens = batch.seq_lens.data<int32_t>();
  const int32_t* table = batch.block_table.data<int32_t>();
  const int32_t* pos = batch.positions.defined() ? batch.positions.data<int32_t>() : nullptr;
  const int32_t* seq = batch.token_seq.defined() ? batch.token_seq.data<int32_t>() : nullptr;
  const int64_t num_pages = cache.k.size(0), stride = batch.block_table.size(1);
  require(qs[0] == 0 && qs[batch.num_seqs] == batch.num_tokens,
          "query_start must run from 0 to num_tokens (" + str(batch.num_tokens) + ")");
  for (int64_t b = 0; b < batch.num_seqs; ++b) {
    const int64_t n = static_cast<int64_t>(qs[b + 1]) - qs[b], len = lens[b];
    const std::string seq_name = "sequence " + str(b);
    require(n >= 0 && n <= batch.max_query_len,
            seq_name + " has " + str(n) + " queries (max_query_len " + str(batch.max_query_len) + ")");
    require(len >= n && len <= batch.max_seq_len,
            seq_name + " has length " + str(len) + " for " + str(n) + " queries (max_seq_len " +
                str(batch.max_seq_len) + ")");
    for (int64_t p = 0; n > 0 && p < (len + kKVPageSize - 1) / kKVPageSize; ++p) {
      const int64_t page = table[b * stride + p];
      require(page >= 0 && page < num_pages,
              seq_name + " page " + str(p) + " is " + str(page) + ", outside the pool of " + str(num_pages));
    }
    for (int64_t t = qs[b]; t < qs[b + 1]; ++t) {
      if (pos) require(pos[t] == len - n + (t - qs[b]), "token " + str(t) + " has position " + str(pos[t]) +
                                                              ", not " + str(len - n + (t - qs[b])));
      if (seq) require(seq[t] == b, "token " + str(t) + " belongs to sequence " + str(b) + ", token_seq says " +
                                        str(seq[t]));
    }
  }
}

// The GPU kernels' limits (values are not read: they stay on the device).
void check_gpu_args(const Tensor& q, const PagedBatch& batch, const PagedKVLayer& cache, const AttentionSpec& spec,
                    const Tensor& out, const Tensor* scratch, const Device& d) {
#if defined(HF_GPU_KERNELS)
  require(spec.head_dim % 2 == 0 && spec.head_dim <= gpu::kMaxAttentionHeadDim,
          "head_dim " + str(spec.head_dim) + " must be even and at most " + str(gpu::kMaxAttentionHeadDim) +
              " on a GPU");
  require(batch.num_seqs <= 65535 && spec.heads <= 65535, "at most 65535 sequences and heads per launch on a GPU");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &out, &cache.k, &cache.v})
    require(reinterpret_cast<uintptr_t>(t->raw_data()) % 16 == 0, "GPU tensors must be 16-byte aligned");
  const int64_t need = gpu::paged_attention_scratch_elems(batch, spec);
  if (need > 0)
    require(scratch && scratch->defined() && scratch->dtype() == DType::kF32 && scratch->device() == d &&
                scratch->numel() >= need,
            "scratch must be F32 on " + d.str() + " with at least " + str(need) + " elements");
#else
  (void)q, (void)batch, (void)cache, (void)spec, (void)out, (void)scratch, (void)d;
#endif
}

}  // namespace

int64_t paged_attention_scratch_elems(const PagedBatch& batch, const AttentionSpec& spec, const Device& device) {
  if (device.is_cpu()) return 0;
#if defined(HF_GPU_KERNELS)
  (void)device;
  return gpu::paged_attention_scratch_elems(batch, spec);
#else
  (void)batch;
  (void)spec;
  no_gpu_kernel("paged_attention_scratch_elems", device);
#endif
}

int64_t paged_attention_shared_scratch_elems(int64_t max_seqs, int64_t max_seq_len, const AttentionSpec& spec,
                                             const Device& device) {
  if (device.is_cpu() || max_seqs <= 0 || max_seq_len <= 0) return 0;
#if defined(HF_GPU_KERNELS)
  return gpu::paged_attention_shared_scratch_elems(max_seqs, max_seq_len, spec);
#else
  (void)spec;
  no_gpu_kernel("paged_attention_shared_scratch_elems", device);
#endif
}

void paged_attention(const Tensor& q, const PagedBatch& batch, const PagedKVLayer& cache, const AttentionSpec& spec,
                     Tensor& out, Tensor* scratch) {
  const Device d = check_shapes(q, batch, cache, spec, out);
  (void)scratch;  // only the GPU kernels use it
  if (d.is_cpu()) {
    check_values(batch, cache);
    if (batch.num_tokens == 0) return;
    cpu::paged_attention(q, batch, cache, spec, out);
    return;
  }
  check_gpu_args(q, batch, cache, spec, out, scratch, d);
  if (batch.num_tokens == 0) return;
  return HF_ON_GPU(kOp, d, gpu::paged_attention(q, batch, cache, spec, out, scratch));
}

#if defined(HF_GPU_KERNELS)
namespace {
// HIPFORMERS_DISABLE_FUSED_QKV_ATTENTION=1 runs the two ops (for A/B measurements).
bool fused_qkv_attention_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("HIPFORMERS_DISABLE_FUSED_QKV_ATTENTION");
    return !(v && *v && *v != '0');
  }();
  return enabled;
}
}  // namespace
#endif

void qkv_rope_paged_attention(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, double eps,
                              const Tensor& inv_freq, float attention_scaling, const PagedBatch& batch,
                              const AttentionSpec& spec, PagedKVLayer& cache, Tensor& q_out, Tensor& out,
                              Tensor* scratch) {
#if defined(HF_GPU_KERNELS)
  if (!qkv.device().is_cpu() && spec.rope_in_attention && fused_qkv_attention_enabled() &&
      gpu::qkv_rope_attention_fusable(batch, qkv.dtype(), spec.head_dim)) {
    // Exactly the checks of the two ops; q_out is left untouched.
    check_qkv_rope_write(qkv, q_norm, k_norm, inv_freq, batch, spec.heads, spec.kv_heads, cache, q_out);
    const Device d = check_shapes(q_out, batch, cache, spec, out);
    check_gpu_args(q_out, batch, cache, spec, out, scratch, d);
    return gpu::qkv_rope_paged_attention_decode(qkv, q_norm, k_norm, eps, inv_freq, attention_scaling, batch, spec,
                                                cache, out, scratch);
  }
#endif
  qkv_rope_write(qkv, q_norm, k_norm, eps, inv_freq, attention_scaling, batch, spec.heads, spec.kv_heads, spec.dtype,
                 cache, q_out);
  paged_attention(q_out, batch, cache, spec, out, scratch);
}

}  // namespace hipformers::kernels
