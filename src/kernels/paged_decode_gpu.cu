// Decode attention over the paged KV cache (paged_attention.h) on the GPU:
// the decode batches of paged_attention (paged_attention_gpu.cu runs the
// rest) and the fused q|k|v prologue variant. In a file of its own so the
// two halves compile in parallel (each is minutes for three AMD targets).
//
// Decode (every sequence has exactly one query: num_tokens == num_seqs and
// max_query_len == 1): split-K "flash-decoding". Grid (split, kv head x head
// chunk, sequence); a block handles up to kG query heads sharing one kv head,
// so each key/value row is read once for all of them, over a fixed range of
// pages_per_split pages. Launch sizes depend only on host-known bounds
// (num_seqs, max_seq_len); seq_lens is read on the device and blocks past a
// sequence's end (or before its sliding window) exit at once, so a captured
// graph can be replayed with other lengths. With one split the block writes
// the output; otherwise it writes its partial (max, sum, acc[D]) to the F32
// scratch, and the last split of a (sequence, kv head, head chunk) to finish
// (a counter in the scratch, reset by that block for the next launch)
// combines them: no separate merge kernel. The kernel is launched dependent
// (gpu/launch.h), so it is scheduled while the q/k/v kernel drains.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "backend.h"
#include "gpu/gpu_types.h"
#include "gpu/launch.h"
#include "gpu/paged_decode.h"
#include "gpu/qk_norm_rope.h"

namespace hipformers::kernels::gpu {
namespace {

template <typename T, int kD> constexpr bool kFusedInstantiated = sizeof(T) == 2 && (kD == 64 || kD == 128);

// ---- Decode: split-K (gpu/paged_decode.h) ------------------------------------
// Grid (split, kv head x head chunk, sequence). Launched dependent: q and
// this step's K/V come from the previous kernel; the block waits for it once
// it has loaded the older keys (paged_decode_block).
template <typename T, int kD, int kVec, int kLanes, int kG, bool kFused>
__global__ void __launch_bounds__(kDecodeThreads) paged_decode_kernel(DecodeParams<T> p) {
  StepTraceScope trace_scope;
  allow_dependents();
  paged_decode_block<T, kD, kVec, kLanes, kG, kFused>(p, blockIdx.x, blockIdx.y, blockIdx.z);
}

// ---- Decode: one block per 256 keys (gpu/paged_decode.h) ----------------------
// Same grid and contract as paged_decode_kernel; 16-bit K/V, head_dim 64 or 128.
template <typename T, int kD, int kG, bool kFused>
__global__ void __launch_bounds__(kWideThreads, 1) paged_decode_wide_kernel(DecodeParams<T> p) {
  StepTraceScope trace_scope;
  allow_dependents();
  paged_decode_wide_block<T, kD, kG, kFused>(p, blockIdx.x, blockIdx.y, blockIdx.z);
}

// ---- Host side ----------------------------------------------------------------
// Which decode kernel a batch takes. The wide kernel where it applies, for
// up to kWideMaxSeqs sequences, unless the spec asks for split-K
// (AttentionSpec::split_decode); otherwise HIPFORMERS_DECODE_ATTENTION=split
// or =wide forces one where both apply (for A/B measurements).
constexpr int64_t kWideMaxSeqs = 8;
enum class DecodeChoice { kAuto, kSplit, kWide };
DecodeChoice decode_choice() {
  static const DecodeChoice choice = [] {
    const char* v = std::getenv("HIPFORMERS_DECODE_ATTENTION");
    if (!v || !*v) return DecodeChoice::kAuto;
    const std::string s(v);
    return s == "split" ? DecodeChoice::kSplit : s == "wide" ? DecodeChoice::kWide : DecodeChoice::kAuto;
  }();
  return choice;
}
bool wide_decode_applies(const AttentionSpec& spec, std::size_t storage_bytes) {
  return storage_bytes == 2 && (spec.head_dim == 64 || spec.head_dim == 128) && spec.kv_heads > 0 &&
         spec.heads % spec.kv_heads == 0;
}
bool use_wide_decode(const PagedBatch& batch, const AttentionSpec& spec, std::size_t storage_bytes) {
  if (!wide_decode_applies(spec, storage_bytes) || spec.split_decode) return false;
  switch (decode_choice()) {
    case DecodeChoice::kSplit: return false;
    case DecodeChoice::kWide: return true;
    default: return batch.num_seqs <= kWideMaxSeqs;
  }
}

template <typename T, int kD>
void launch_decode_wide(const DecodeParams<T>& prm, const DecodePlan& p, int num_seqs, bool fused, gpuStream_t s) {
  if constexpr (sizeof(T) == 2 && (kD == 64 || kD == 128)) {
    const dim3 grid(static_cast<unsigned>(p.splits), static_cast<unsigned>(prm.kv_heads * p.head_chunks),
                    static_cast<unsigned>(num_seqs));
    auto go = [&](auto kernel) { launch_dependent(kernel, grid, dim3(kWideThreads), 0, s, prm); };
    auto by_group = [&](auto fused_tag) {
      constexpr bool kF = decltype(fused_tag)::value;
      switch (p.kG) {
        case 1: go(paged_decode_wide_kernel<T, kD, 1, kF>); break;
        case 2: go(paged_decode_wide_kernel<T, kD, 2, kF>); break;
        default: go(paged_decode_wide_kernel<T, kD, kWideMaxHeads, kF>); break;
      }
    };
    if (fused) by_group(std::true_type{});
    else by_group(std::false_type{});
  } else {
    (void)prm, (void)p, (void)num_seqs, (void)fused, (void)s;
    throw_error(ErrorKind::kUnsupported, "the wide decode kernel takes 16-bit K/V and head_dim 64 or 128");
  }
}

// fused: null for plain decode, else the q|k|v prologue (kFused).
template <typename T, int kD, int kVec, int kLanes>
void launch_decode(const DecodeParams<T>& prm, const DecodePlan& p, int num_seqs, bool fused, gpuStream_t s) {
  const dim3 grid(static_cast<unsigned>(p.splits), static_cast<unsigned>(prm.kv_heads * p.head_chunks),
                  static_cast<unsigned>(num_seqs));
  auto go = [&](auto kernel) { launch_dependent(kernel, grid, dim3(kDecodeThreads), 0, s, prm); };
  auto by_group = [&](auto fused_tag) {
    constexpr bool kF = decltype(fused_tag)::value;
    switch (p.kG) {
      case 1: go(paged_decode_kernel<T, kD, kVec, kLanes, 1, kF>); break;
      case 2: go(paged_decode_kernel<T, kD, kVec, kLanes, 2, kF>); break;
      case 4: go(paged_decode_kernel<T, kD, kVec, kLanes, 4, kF>); break;
      default: go(paged_decode_kernel<T, kD, kVec, kLanes, 8, kF>); break;
    }
  };
  if constexpr (kFusedInstantiated<T, kD>) {
    if (fused) return by_group(std::true_type{});
  }
  if (fused) throw_error(ErrorKind::kUnsupported, "the fused q|k|v decode kernel takes 16-bit storage and head_dim 64 or 128");
  by_group(std::false_type{});
}

template <typename T>
void run_decode(const T* q, const PagedBatch& batch, const AttentionSpec& spec, const PagedKVLayer& cache, T* out,
                Tensor* scratch, const DecodeQkv* fused, gpuStream_t s) {
  const bool wide = use_wide_decode(batch, spec, sizeof(T));
  const DecodePlan p = wide ? decode_plan_wide(batch, spec) : decode_plan(batch, spec);
  const bool has_scratch = scratch && scratch->defined();
  DecodeParams<T> prm =
      decode_params<T>(batch, spec, p, q, cache, out, has_scratch ? static_cast<float*>(scratch->mutable_raw_data()) : nullptr,
                       has_scratch ? scratch->numel() : 0);
  if (fused) prm.fused = *fused;
  const int n = static_cast<int>(batch.num_seqs);
  with_decode_shape<T>(prm.D, [&](auto kd, auto kvec, auto klanes) {
    constexpr int kD = decltype(kd)::value;
    if (wide) launch_decode_wide<T, kD>(prm, p, n, fused != nullptr, s);
    else launch_decode<T, kD, decltype(kvec)::value, decltype(klanes)::value>(prm, p, n, fused != nullptr, s);
  });
  check_launch("paged_attention (decode)");
}

// The split-K scratch a decode batch needs: either kernel may run it (which
// one depends on the storage type too), so the larger need of each part.
struct DecodeScratch {
  int64_t counters = 0, partials = 0;
};
DecodeScratch decode_scratch(const PagedBatch& batch, const AttentionSpec& spec) {
  static_assert(sizeof(int) == sizeof(float), "a merge counter takes one F32 element");
  DecodeScratch need;
  auto take = [&](const DecodePlan& p) {
    need.counters = std::max(need.counters, counter_elems(batch.num_seqs, spec.heads, p));
    need.partials = std::max(need.partials, partial_elems(batch.num_seqs, spec.heads, spec.head_dim, p));
  };
  take(decode_plan(batch, spec));
  if (wide_decode_applies(spec, 2)) take(decode_plan_wide(batch, spec));
  return need;
}

}  // namespace

int64_t paged_attention_scratch_elems(const PagedBatch& batch, const AttentionSpec& spec) {
  if (!is_decode(batch) || batch.num_seqs == 0 || spec.kv_heads <= 0 || spec.heads <= 0) return 0;
  const DecodeScratch need = decode_scratch(batch, spec);
  return need.counters + need.partials;
}

int64_t paged_attention_shared_scratch_elems(int64_t max_seqs, int64_t max_seq_len, const AttentionSpec& spec) {
  // Each decode batch of up to max_seqs sequences takes its counters from
  // the start and its partials from the end (gpu/paged_decode.h): the
  // largest of each, side by side, keep every pair apart.
  DecodeScratch most;
  for (int64_t seqs = 1; seqs <= max_seqs; ++seqs) {
    PagedBatch decode;
    decode.num_seqs = seqs;
    decode.num_tokens = seqs;
    decode.max_query_len = 1;
    decode.max_seq_len = max_seq_len;
    const DecodeScratch need = decode_scratch(decode, spec);
    most.counters = std::max(most.counters, need.counters);
    most.partials = std::max(most.partials, need.partials);
  }
  return most.counters + most.partials;
}

void paged_attention_decode(const Tensor& q, const PagedBatch& batch, const PagedKVLayer& cache,
                            const AttentionSpec& spec, Tensor& out, Tensor* scratch) {
  gpuStream_t s = stream_for(q.device().index);
  dispatch_float(q.dtype(), [&](auto tag) {
    using E = decltype(tag);
    run_decode<E>(static_cast<const E*>(q.raw_data()), batch, spec, cache, static_cast<E*>(out.mutable_raw_data()),
                  scratch, nullptr, s);
  });
}

// Each split block of the fused kernel normalises and rotates its own query
// heads, which pays off for small batches only: at 64 sequences on the H200
// the two ops took 2.53 ms per decode step, the fused kernel 3.05
// (docs/PERFORMANCE.md).
constexpr int64_t kFusedQkvAttentionMaxSeqs = 8;
// The fused kernel is instantiated for 16-bit storage and head_dim 64 or 128
// only (what models run); anything else runs the two ops.
bool qkv_rope_attention_fusable(const PagedBatch& batch, DType storage, int64_t head_dim) {
  return is_decode(batch) && batch.num_seqs > 0 && batch.num_seqs <= kFusedQkvAttentionMaxSeqs &&
         (storage == DType::kBF16 || storage == DType::kF16) && (head_dim == 64 || head_dim == 128);
}

void qkv_rope_paged_attention_decode(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, double eps,
                                     const Tensor& inv_freq, float attention_scaling, const PagedBatch& batch,
                                     const AttentionSpec& spec, PagedKVLayer& cache, Tensor& out, Tensor* scratch) {
  gpuStream_t s = stream_for(qkv.device().index);
  const DecodeQkv fused = decode_qkv(q_norm, k_norm, cache, inv_freq, eps, attention_scaling, spec);
  dispatch_float(qkv.dtype(), [&](auto tag) {
    using E = decltype(tag);
    run_decode<E>(static_cast<const E*>(qkv.raw_data()), batch, spec, cache, static_cast<E*>(out.mutable_raw_data()),
                  scratch, &fused, s);
  });
}

}  // namespace hipformers::kernels::gpu
