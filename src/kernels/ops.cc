// Argument checks (shapes, dtypes, devices) and device dispatch for every op.
// User-reachable mistakes surface here as hipformers::Error, so backends can
// assume well-formed arguments.
#include <cstdint>
#include <string>

#include "backend.h"
#include "hipformers/core/error.h"

namespace hipformers::kernels {

void no_gpu_kernel(const char* op, const Device& device) {
  throw_error(ErrorKind::kUnsupported, std::string(op) + " has no kernel for " + device.str() + " yet");
}

namespace {

bool is_gpu_storage(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

// Every tensor an op touches must be on one device; returns that device. On
// the CPU every tensor is F32 (bf16/f16 are emulated through `dtype`). On a
// GPU the data tensors share one storage dtype (F32, BF16 or F16), and the
// `f32_only` ones (rstd, probs) are F32.
Device common_device(const char* op, std::initializer_list<const Tensor*> tensors,
                     std::initializer_list<const Tensor*> f32_only = {}) {
  std::optional<Device> device;
  std::optional<DType> storage;
  auto visit = [&](const Tensor* t, bool data) {
    if (!t || !t->defined()) return;
    if (device && !(t->device() == *device))
      throw_invalid(std::string(op) + ": tensors on different devices (" + device->str() + " and " +
                    t->device().str() + ")");
    device = t->device();
    if (!data || device->is_cpu()) {
      if (t->dtype() != DType::kF32)
        throw_invalid(std::string(op) + ": expected F32 tensors, got " + dtype_name(t->dtype()));
      return;
    }
    if (!is_gpu_storage(t->dtype()))
      throw_invalid(std::string(op) + ": expected F32, BF16 or F16 tensors, got " + dtype_name(t->dtype()));
    if (storage && *storage != t->dtype())
      throw_invalid(std::string(op) + ": tensors of different dtypes (" + dtype_name(*storage) + " and " +
                    dtype_name(t->dtype()) + ")");
    storage = t->dtype();
  };
  for (const Tensor* t : tensors) visit(t, true);
  for (const Tensor* t : f32_only) visit(t, false);
  return device.value_or(Device::cpu());
}

int64_t rows_of(const Tensor& t) { return t.ndim() == 0 ? 1 : t.numel() / std::max<int64_t>(t.size(-1), 1); }

void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw_invalid(std::string(op) + ": " + what);
}

// An I32 index tensor (token ids, positions, block tables) on `device`.
void require_index(const char* op, const Tensor& t, const Device& device, const char* name) {
  require(t.defined(), op, std::string(name) + " is undefined");
  require(t.dtype() == DType::kI32, op, std::string(name) + " must be I32, not " + dtype_name(t.dtype()));
  require(t.device() == device, op,
          std::string(name) + " is on " + t.device().str() + ", the other tensors on " + device.str());
}

}  // namespace

void embedding(const Tensor& weight, std::span<const int32_t> ids, Tensor& out) {
  Device d = common_device("embedding", {&weight, &out});
  require(weight.ndim() == 2 && out.numel() == static_cast<int64_t>(ids.size()) * weight.size(1), "embedding",
          "weight " + weight.shape().str() + " and output " + out.shape().str() + " do not fit " +
              std::to_string(ids.size()) + " ids");
  for (std::size_t t = 0; t < ids.size(); ++t)
    if (ids[t] < 0 || ids[t] >= weight.size(0))
      throw_invalid("token id " + std::to_string(ids[t]) + " at position " + std::to_string(t) +
                    " is out of range for a vocabulary of " + std::to_string(weight.size(0)));
  if (!d.is_cpu()) return HF_ON_GPU("embedding", d, gpu::embedding(weight, ids, out));
  cpu::embedding(weight, ids, out);
}

void embedding(const Tensor& weight, const Tensor& ids, Tensor& out) {
  Device d = common_device("embedding", {&weight, &out});
  require_index("embedding", ids, d, "ids");
  require(weight.ndim() == 2 && ids.ndim() == 1 && out.numel() == ids.numel() * weight.size(1), "embedding",
          "weight " + weight.shape().str() + " and output " + out.shape().str() + " do not fit ids " +
              ids.shape().str());
  if (!d.is_cpu()) return HF_ON_GPU("embedding", d, gpu::embedding(weight, ids, out));
  const int32_t* id = ids.data<int32_t>();
  for (int64_t t = 0; t < ids.numel(); ++t)
    if (id[t] < 0 || id[t] >= weight.size(0))
      throw_invalid("token id " + std::to_string(id[t]) + " at position " + std::to_string(t) +
                    " is out of range for a vocabulary of " + std::to_string(weight.size(0)));
  cpu::embedding(weight, ids, out);
}

void embedding_backward(const Tensor& dout, std::span<const int32_t> ids, Tensor& dweight) {
  Device d = common_device("embedding_backward", {&dout, &dweight});
  require(dweight.ndim() == 2 && dout.numel() == static_cast<int64_t>(ids.size()) * dweight.size(1),
          "embedding_backward", "shape mismatch");
  for (int32_t id : ids) require(id >= 0 && id < dweight.size(0), "embedding_backward", "id out of range");
  if (!d.is_cpu()) no_gpu_kernel("embedding_backward", d);
  cpu::embedding_backward(dout, ids, dweight);
}

static void check_norm(const char* op, const Tensor& x, const Tensor& weight, const Tensor& out) {
  require(x.ndim() >= 1 && weight.ndim() == 1 && x.size(-1) == weight.size(0) && out.numel() == x.numel(), op,
          "input " + x.shape().str() + ", weight " + weight.shape().str() + ", output " + out.shape().str() +
              " do not match");
}

void rms_norm(const Tensor& x, const Tensor& weight, double eps, DType dtype, Tensor& out, Tensor* rstd) {
  Device d = common_device("rms_norm", {&x, &weight, &out}, {rstd});
  check_norm("rms_norm", x, weight, out);
  if (rstd) require(rstd->numel() == rows_of(x), "rms_norm", "rstd must hold one value per row");
  Tensor input = x;
  if (!d.is_cpu()) return HF_ON_GPU("rms_norm", d, gpu::rms_norm(nullptr, input, weight, eps, dtype, out, rstd));
  cpu::rms_norm(nullptr, input, weight, eps, dtype, out, rstd);
}

void add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& weight, double eps, DType dtype, Tensor& out,
                  Tensor* rstd) {
  Device d = common_device("add_rms_norm", {&x, &residual, &weight, &out}, {rstd});
  check_norm("add_rms_norm", residual, weight, out);
  require(x.numel() == residual.numel(), "add_rms_norm", "input and residual differ in size");
  if (rstd) require(rstd->numel() == rows_of(x), "add_rms_norm", "rstd must hold one value per row");
  if (!d.is_cpu())
    return HF_ON_GPU("add_rms_norm", d, gpu::rms_norm(&x, residual, weight, eps, dtype, out, rstd));
  cpu::rms_norm(&x, residual, weight, eps, dtype, out, rstd);
}

void rms_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                       Tensor& dweight) {
  Device d = common_device("rms_norm_backward", {&dout, &x, &weight, &rstd, &dx, &dweight});
  check_norm("rms_norm_backward", x, weight, dout);
  require(dx.numel() == x.numel() && dweight.numel() == weight.numel() && rstd.numel() == rows_of(x),
          "rms_norm_backward", "shape mismatch");
  if (!d.is_cpu()) no_gpu_kernel("rms_norm_backward", d);
  cpu::rms_norm_backward(dout, x, weight, rstd, dx, dweight);
}

static void check_rope(const Tensor& x, int64_t heads, std::span<const int64_t> positions,
                       const RopeFrequencies& freqs) {
  int64_t half = static_cast<int64_t>(freqs.inv_freq.size());
  require(heads > 0 && half > 0 && x.numel() == static_cast<int64_t>(positions.size()) * heads * 2 * half, "rope",
          "tensor " + x.shape().str() + " is not [" + std::to_string(positions.size()) + ", " +
              std::to_string(heads) + ", " + std::to_string(2 * half) + "]");
}

void apply_rope(Tensor& x, int64_t heads, std::span<const int64_t> positions, const RopeFrequencies& freqs,
                DType dtype) {
  Device d = common_device("rope", {&x});
  check_rope(x, heads, positions, freqs);
  if (!d.is_cpu())
    return HF_ON_GPU("rope", d, gpu::apply_rope(x, heads, positions, freqs, dtype, false));
  cpu::apply_rope(x, heads, positions, freqs, dtype, false);
}

void apply_rope_backward(Tensor& dy, int64_t heads, std::span<const int64_t> positions,
                         const RopeFrequencies& freqs) {
  Device d = common_device("rope_backward", {&dy});
  check_rope(dy, heads, positions, freqs);
  if (!d.is_cpu()) no_gpu_kernel("rope_backward", d);
  cpu::apply_rope(dy, heads, positions, freqs, DType::kF32, true);
}

static void check_linear(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const Tensor& y) {
  require(weight.ndim() == 2 && x.ndim() >= 1 && x.size(-1) == weight.size(1) &&
              y.numel() == rows_of(x) * weight.size(0) && (!bias.defined() || bias.numel() == weight.size(0)),
          op,
          "input " + x.shape().str() + ", weight " + weight.shape().str() + ", bias " +
              (bias.defined() ? bias.shape().str() : std::string("none")) + ", output " + y.shape().str() +
              " do not match");
}

void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, Tensor& y) {
  Device d = common_device("linear", {&x, &weight, &bias, &y});
  check_linear("linear", x, weight, bias, y);
  if (!d.is_cpu()) return HF_ON_GPU("linear", d, gpu::linear(x, weight, bias, dtype, y));
  cpu::linear(x, weight, bias, dtype, y);
}

static void check_fused_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const LinearFusion& f,
                               const Tensor& y) {
  require(weight.ndim() == 2 && weight.size(1) > 0, "fused_linear", "weight must be [out, in]");
  const int64_t in_f = weight.size(1);
  require(!f.swiglu_output || weight.size(0) % 2 == 0, "fused_linear",
          "a SwiGLU output needs a [gate; up] weight with an even number of rows, not " + weight.shape().str());
  const int64_t out_f = f.swiglu_output ? weight.size(0) / 2 : weight.size(0);
  require(x.ndim() >= 1 && x.size(-1) == in_f, "fused_linear",
          "input " + x.shape().str() + " does not have rows of " + std::to_string(in_f));
  const int64_t rows = rows_of(x);
  require(y.numel() == rows * out_f && (!bias.defined() || bias.numel() == weight.size(0)), "fused_linear",
          "output " + y.shape().str() + " / bias do not match " + std::to_string(rows) + " rows of " +
              std::to_string(out_f));
  if (f.norm_weight)
    require(f.norm_weight->ndim() == 1 && f.norm_weight->size(0) == in_f, "fused_linear",
            "norm weight " + f.norm_weight->shape().str() + " does not match in_features " + std::to_string(in_f));
  if (f.residual) require(f.residual->numel() == y.numel(), "fused_linear", "residual and output differ in size");
}

bool fused_linear_supported(const Tensor& x, const Tensor& weight, const LinearFusion& fusion) {
  if (x.device().is_cpu()) return true;
#if defined(HF_GPU_KERNELS)
  return gpu::fused_linear_supported(x, weight, fusion);
#else
  (void)weight;
  (void)fusion;
  return false;
#endif
}

void fused_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, DType dtype, const LinearFusion& fusion,
                  Tensor& y) {
  Device d = common_device("fused_linear", {&x, &weight, &bias, &y, fusion.norm_weight, fusion.residual});
  check_fused_linear(x, weight, bias, fusion, y);
  if (!d.is_cpu()) {
#if defined(HF_GPU_KERNELS)
    require(gpu::fused_linear_supported(x, weight, fusion), "fused_linear",
            "these arguments need the unfused ops on " + d.str() + " (see fused_linear_supported)");
#endif
    return HF_ON_GPU("fused_linear", d, gpu::fused_linear(x, weight, bias, dtype, fusion, y));
  }
  cpu::fused_linear(x, weight, bias, dtype, fusion, y);
}

void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, Tensor& dx, Tensor& dweight,
                     Tensor& dbias) {
  Device d = common_device("linear_backward", {&dy, &x, &weight, &dx, &dweight, &dbias});
  check_linear("linear_backward", x, weight, dbias, dy);
  require(dx.numel() == x.numel() && dweight.numel() == weight.numel(), "linear_backward", "shape mismatch");
  if (!d.is_cpu()) no_gpu_kernel("linear_backward", d);
  cpu::linear_backward(dy, x, weight, dx, dweight, dbias);
}

void silu_and_mul(const Tensor& gate, const Tensor& up, DType dtype, Tensor& out) {
  Device d = common_device("silu_and_mul", {&gate, &up, &out});
  require(gate.numel() == up.numel() && out.numel() == gate.numel(), "silu_and_mul",
          "gate " + gate.shape().str() + ", up " + up.shape().str() + ", out " + out.shape().str() + " differ");
  if (!d.is_cpu()) return HF_ON_GPU("silu_and_mul", d, gpu::silu_and_mul(gate, up, dtype, out));
  cpu::silu_and_mul(gate, up, dtype, out);
}

void silu_and_mul_packed(const Tensor& gate_up, DType dtype, Tensor& out) {
  Device d = common_device("silu_and_mul_packed", {&gate_up, &out});
  require(out.ndim() >= 1 && gate_up.ndim() >= 1 && gate_up.size(-1) == 2 * out.size(-1) &&
              gate_up.numel() == 2 * out.numel(),
          "silu_and_mul_packed",
          "gate_up " + gate_up.shape().str() + " is not [N, 2I] for an output " + out.shape().str() + " [N, I]");
  if (!d.is_cpu()) return HF_ON_GPU("silu_and_mul_packed", d, gpu::silu_and_mul_packed(gate_up, dtype, out));
  cpu::silu_and_mul_packed(gate_up, dtype, out);
}

void silu_and_mul_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup) {
  Device d = common_device("silu_and_mul_backward", {&dout, &gate, &up, &dgate, &dup});
  require(gate.numel() == up.numel() && dout.numel() == gate.numel() && dgate.numel() == gate.numel() &&
              dup.numel() == gate.numel(),
          "silu_and_mul_backward", "shape mismatch");
  if (!d.is_cpu()) no_gpu_kernel("silu_and_mul_backward", d);
  cpu::silu_and_mul_backward(dout, gate, up, dgate, dup);
}

void kv_cache_append(KVCacheView& cache, const Tensor& k, const Tensor& v) {
  Device d = common_device("kv_cache_append", {&cache.k, &cache.v, &k, &v});
  require(cache.k.ndim() == 3 && cache.v.shape() == cache.k.shape(), "kv_cache_append",
          "cache tensors must be [kv_heads, capacity, head_dim]");
  int64_t kv_width = cache.k.size(0) * cache.k.size(2);
  require(k.ndim() >= 1 && k.size(-1) == kv_width && v.shape() == k.shape(), "kv_cache_append",
          "keys " + k.shape().str() + " / values " + v.shape().str() + " do not fit a cache of " +
              cache.k.shape().str());
  int64_t tokens = rows_of(k);
  if (cache.length + tokens > cache.k.size(1))
    throw_invalid("KV cache full: " + std::to_string(cache.length) + " + " + std::to_string(tokens) +
                  " positions exceed its capacity of " + std::to_string(cache.k.size(1)));
  if (!d.is_cpu()) return HF_ON_GPU("kv_cache_append", d, gpu::kv_cache_append(cache, k, v));
  cpu::kv_cache_append(cache, k, v);
}

void attention(const Tensor& q, std::span<const int64_t> positions, const KVCacheView& cache,
               const AttentionSpec& spec, Tensor& out, Tensor* probs) {
  Device d = common_device("attention", {&q, &cache.k, &cache.v, &out}, {probs});
  require(spec.heads > 0 && spec.kv_heads > 0 && spec.head_dim > 0 && spec.heads % spec.kv_heads == 0, "attention",
          "heads (" + std::to_string(spec.heads) + ") must be a positive multiple of kv_heads (" +
              std::to_string(spec.kv_heads) + ")");
  int64_t T = static_cast<int64_t>(positions.size());
  require(q.numel() == T * spec.heads * spec.head_dim && out.numel() == q.numel(), "attention",
          "queries " + q.shape().str() + " / output " + out.shape().str() + " are not [" + std::to_string(T) +
              ", " + std::to_string(spec.heads * spec.head_dim) + "]");
  require(cache.k.ndim() == 3 && cache.k.size(0) == spec.kv_heads && cache.k.size(2) == spec.head_dim &&
              cache.v.shape() == cache.k.shape() && cache.length <= cache.k.size(1),
          "attention", "cache " + cache.k.shape().str() + " does not match the heads");
  for (int64_t p : positions)
    require(p >= 0 && p < cache.length, "attention",
            "query position " + std::to_string(p) + " has no cached key (cache length " +
                std::to_string(cache.length) + ")");
  if (spec.sliding_window) require(*spec.sliding_window > 0, "attention", "sliding window must be positive");
  if (probs) require(probs->numel() == spec.heads * T * cache.length, "attention", "probs must be [heads, T, S]");
  if (!d.is_cpu()) {
#if defined(HF_GPU_KERNELS)
    require(spec.head_dim <= gpu::kMaxAttentionHeadDim, "attention",
            "head_dim " + std::to_string(spec.head_dim) + " exceeds the GPU kernel's limit of " +
                std::to_string(gpu::kMaxAttentionHeadDim));
#endif
    return HF_ON_GPU("attention", d, gpu::attention(q, positions, cache, spec, out, probs));
  }
  cpu::attention(q, positions, cache, spec, out, probs);
}

Device check_qkv_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor& inv_freq,
                            const PagedBatch& batch, int64_t heads, int64_t kv_heads, const PagedKVLayer& cache,
                            const Tensor& q_out) {
  const char* op = "qkv_rope_write";
  Device d = common_device(op, {&qkv, &q_norm, &k_norm, &cache.k, &cache.v, &q_out}, {&inv_freq});
  require(heads > 0 && kv_heads > 0, op,
          "heads (" + std::to_string(heads) + ") and kv_heads (" + std::to_string(kv_heads) + ") must be positive");
  require(cache.k.ndim() == 4 && cache.k.size(1) == kv_heads && cache.k.size(2) == kKVPageSize &&
              cache.k.size(3) > 0 && cache.k.size(3) % 2 == 0 && cache.v.shape() == cache.k.shape(),
          op, "the k/v pools " + cache.k.shape().str() + " / " + cache.v.shape().str() + " are not [num_pages, " +
                  std::to_string(kv_heads) + ", " + std::to_string(kKVPageSize) + ", even head_dim]");
  const int64_t D = cache.k.size(3), T = batch.num_tokens;
  require(T >= 0 && batch.num_seqs >= 0, op, "negative num_tokens or num_seqs");
  require(qkv.numel() == T * (heads + 2 * kv_heads) * D && q_out.numel() == T * heads * D, op,
          "qkv " + qkv.shape().str() + " / q_out " + q_out.shape().str() + " do not fit " + std::to_string(T) +
              " tokens of " + std::to_string(heads) + " + 2 x " + std::to_string(kv_heads) + " heads of " +
              std::to_string(D));
  require(q_norm.defined() == k_norm.defined(), op, "q_norm and k_norm must both be given or both be absent");
  if (q_norm.defined())
    require(q_norm.numel() == D && k_norm.numel() == D, op,
            "q_norm " + q_norm.shape().str() + " / k_norm " + k_norm.shape().str() + " are not [" +
                std::to_string(D) + "]");
  require(inv_freq.defined() && inv_freq.numel() == D / 2, op,
          "inv_freq must hold head_dim / 2 = " + std::to_string(D / 2) + " values");
  require_index(op, batch.positions, d, "positions");
  require_index(op, batch.token_seq, d, "token_seq");
  require_index(op, batch.block_table, d, "block_table");
  require(batch.positions.numel() >= T && batch.token_seq.numel() >= T, op,
          "positions / token_seq hold fewer than " + std::to_string(T) + " tokens");
  require(batch.block_table.ndim() == 2 && batch.block_table.size(0) >= batch.num_seqs, op,
          "block_table " + batch.block_table.shape().str() + " is not [num_seqs, max_pages_per_seq]");
  return d;
}

void qkv_rope_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, double eps,
                    const Tensor& inv_freq, float attention_scaling, const PagedBatch& batch, int64_t heads,
                    int64_t kv_heads, DType dtype, PagedKVLayer& cache, Tensor& q_out) {
  const char* op = "qkv_rope_write";
  const Device d = check_qkv_rope_write(qkv, q_norm, k_norm, inv_freq, batch, heads, kv_heads, cache, q_out);
  const int64_t T = batch.num_tokens;
  if (T == 0) return;
  // On a GPU the index values stay on the device (no sync): a token whose
  // sequence, position or page is out of range gets no cache write there.
  if (!d.is_cpu())
    return HF_ON_GPU(op, d,
                     gpu::qkv_rope_write(qkv, q_norm, k_norm, eps, inv_freq, attention_scaling, batch, heads, kv_heads,
                                         dtype, cache, q_out));
  const int32_t* pos = batch.positions.data<int32_t>();
  const int32_t* seq = batch.token_seq.data<int32_t>();
  const int32_t* table = batch.block_table.data<int32_t>();
  const int64_t max_pages = batch.block_table.size(1), num_pages = cache.k.size(0);
  for (int64_t t = 0; t < T; ++t) {
    const std::string token = "token " + std::to_string(t);
    require(seq[t] >= 0 && seq[t] < batch.num_seqs, op,
            token + ": sequence " + std::to_string(seq[t]) + " is outside [0, " + std::to_string(batch.num_seqs) + ")");
    require(pos[t] >= 0 && pos[t] / kKVPageSize < max_pages, op,
            token + ": position " + std::to_string(pos[t]) + " is outside the block table (" +
                std::to_string(max_pages) + " pages)");
    const int32_t page = table[seq[t] * max_pages + pos[t] / kKVPageSize];
    require(page >= 0 && page < num_pages, op,
            token + ": page " + std::to_string(page) + " is outside the pool of " + std::to_string(num_pages));
  }
  cpu::qkv_rope_write(qkv, q_norm, k_norm, eps, inv_freq, attention_scaling, batch, heads, kv_heads, dtype, cache,
                      q_out);
}

void argmax_rows(const Tensor& logits, Tensor& ids) {
  const char* op = "argmax_rows";
  Device d = common_device(op, {&logits});
  require_index(op, ids, d, "ids");
  require(logits.ndim() == 2 && logits.size(1) > 0 && ids.numel() == logits.size(0), op,
          "logits " + logits.shape().str() + " must be [B, V > 0] with ids [B], got ids " + ids.shape().str());
  require(logits.size(1) <= INT32_MAX, op, "a row of more than 2^31 - 1 logits");
  if (logits.size(0) == 0) return;
  if (!d.is_cpu()) return HF_ON_GPU(op, d, gpu::argmax_rows(logits, ids));
  cpu::argmax_rows(logits, ids);
}

}  // namespace hipformers::kernels
