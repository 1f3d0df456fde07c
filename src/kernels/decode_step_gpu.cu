// The persistent decode step (decode_step.h): one kernel per decode step of
// up to 8 sequences. Its reference is the op-by-op step (fused_linear +
// qkv_rope_paged_attention, batch_step.cc), whose blocks it runs:
// GemvBlock (gpu/gemv.h) for every projection and paged_decode_block
// (gpu/paged_decode.h) for attention.
//
// Grid. One block of kGemvThreads threads per multiprocessor (times what
// fits): every block must be resident at once for the grid barriers, so the
// launch is cooperative (the driver refuses a grid that cannot be).
//
// Phases, per layer (| = grid barrier, what it waits for in brackets):
//   | [h]    qkv = W_qkv norm(h)             GemvBlock, norm prologue
//   | [qkv]  attention items                 split x (kv head, head chunk) x sequence,
//                                            as paged_decode_kernel's blocks
//   | [attn] h += W_o attn                   residual epilogue
//   | [h]    act = swiglu(W_gu norm(h))      norm prologue, SwiGLU epilogue
//   | [act]  h += W_down act                 residual epilogue
// then | [h] logits = W_lm norm(h). Before each barrier a block loads the
// first chunk of its next GEMV into registers, and after its qkv tile it
// asks L2 for its o/gate-up/down slices (and during down for the next
// layer's qkv), so the weights keep streaming while blocks wait.
//
// Memory order. A barrier is: __syncthreads; thread 0 fences, adds one to
// the arrival counter and spins until every block of this phase arrived,
// fences again; __syncthreads (the pattern of cooperative groups' grid
// sync). Data made inside the kernel (h, qkv, attn, act) is read with plain
// loads, never through the read-only path (GemvBlock<..., kStableX = false>,
// DecodeParams' plain pointers). The arrival counter only grows during a
// launch; the last block to leave resets it for the next launch.
//
// HIP: compiled (cooperative launch through hipLaunchCooperativeKernel),
// never run here.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backend.h"
#include "gpu/gemv.h"
#include "gpu/gpu_types.h"
#include "gpu/paged_decode.h"
#include "hipformers/core/error.h"
#include "hipformers/kernels/decode_step.h"
#include "hipformers/runtime/allocator.h"

namespace hipformers::kernels {
namespace gpu {
namespace {

// One layer's device addresses (storage type T; null where absent).
struct LayerTable {
  const void* input_norm;
  const void* qkv;
  const void* qkv_bias;
  const void* q_norm;
  const void* k_norm;
  const void* o;
  const void* o_bias;
  const void* post_norm;
  const void* gate_up;
  const void* gate_up_bias;
  const void* down;
  const void* down_bias;
  void* k_pool;
  void* v_pool;
  int window;
};

// K splits of the step's five GEMVs (gemv_split for this grid).
struct StepSplits {
  int qkv = 1, o = 1, gate_up = 1, down = 1, lm_head = 1;
};

template <typename T> struct StepArgs {
  const LayerTable* layers;
  int num_layers;
  int rows;
  int64_t hidden, inter, qkv_out, attn_width, vocab;
  float eps;
  int mode;
  StepSplits split;
  int kG;  // query heads per attention block (the decode plan's)
  DecodeParams<T> attn;  // per-layer fields (pools, norms, window) set per layer
  int attn_items;        // splits x columns x sequences
  T* h;
  T* qkv;
  T* attn_out;
  T* proj;
  T* act;
  T* branch;
  T* logits;
  const T* final_norm;
  const T* lm_head;
  unsigned* barrier;  // kBarrierWords, zeroed
};

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
#if defined(HIPFORMERS_WITH_CUDA)
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

// The barrier's words sit in separate 128-byte lines (kBarrierStride
// words apart): arrivals (atomics), the release flag (polled), departures.
// Polls and arrivals on one line queue behind each other in its L2 slice.
constexpr int kBarrierStride = 32;
constexpr int kBarrierWords = 3 * kBarrierStride;

__device__ __forceinline__ void spin_pause() {
#if defined(HIPFORMERS_WITH_CUDA)
  __nanosleep(32);
#else
  __builtin_amdgcn_s_sleep(1);
#endif
}

struct GridBarrier {
  unsigned* words;  // [0] arrivals, [kBarrierStride] phases released, [2 * kBarrierStride] departures
  unsigned blocks, phase = 0;

  __device__ __forceinline__ void sync() {
    ++phase;
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();  // this block's writes, before its arrival
      unsigned* released = words + kBarrierStride;
      if (atomicAdd(words, 1u) + 1 == phase * blocks) {  // the last to arrive releases the phase
        atomicExch(released, phase);
      } else {
        while (load_acquire(released) < phase) spin_pause();
      }
      __threadfence();  // everyone's writes, before this block reads them
    }
    __syncthreads();
  }
  // After the last phase: the last block out resets the words.
  __device__ __forceinline__ void leave() {
    __syncthreads();
    if (threadIdx.x == 0) {
      if (atomicAdd(words + 2 * kBarrierStride, 1u) + 1 == blocks) {  // every other block passed its last barrier
        words[0] = 0;
        words[kBarrierStride] = 0;
        words[2 * kBarrierStride] = 0;
        __threadfence();
      }
    }
  }
};

template <typename T>
__device__ __forceinline__ GemvArgs<T> gemv_args(const StepArgs<T>& a, const void* w, const void* bias, const T* x,
                                                 T* y, int64_t out_f, int64_t in_f, int split, const void* norm,
                                                 T* residual) {
  GemvArgs<T> g;
  g.x = x;
  g.w = static_cast<const T*>(w);
  g.bias = static_cast<const T*>(bias);
  g.y = y;
  g.rows = a.rows;
  g.out_f = out_f;
  g.in_f = in_f;
  g.split = split;
  g.mode = a.mode;
  g.fusion.norm_w = norm;
  g.fusion.eps = a.eps;
  g.fusion.residual = residual;
  return g;
}

// Attention items of one layer, block b taking items b, b + grid, ...
template <typename T, int kD, int kVec, int kLanes, int kG>
__device__ __forceinline__ void attention_items(const DecodeParams<T>& p, int items, int64_t block, int64_t grid) {
  const int columns = p.kv_heads * p.head_chunks;
  for (int64_t i = block; i < items; i += grid) {
    const int split = static_cast<int>(i % p.splits);
    const int column = static_cast<int>(i / p.splits % columns);
    const int b = static_cast<int>(i / (static_cast<int64_t>(p.splits) * columns));
    __syncthreads();  // the previous item's shared memory is free
    paged_decode_block<T, kD, kVec, kLanes, kG, true, kGemvThreads>(p, split, column, b, columns);
  }
}

template <typename T, int ROWS, int kD, int kVec, int kLanes>
__global__ void __launch_bounds__(kGemvThreads, 1) decode_step_kernel(StepArgs<T> a) {
  using NormGemv = GemvBlock<T, ROWS, true, kInputNorm, kOutputPlain, false>;      // qkv, lm_head
  using PlainGemv = GemvBlock<T, ROWS, true, kInputPlain, kOutputPlain, false>;    // o, down
  using SwiGluGemv = GemvBlock<T, ROWS, true, kInputNorm, kOutputSwiGLU, false>;   // gate|up
  const int64_t block = blockIdx.x, grid = gridDim.x;
  GridBarrier bar{a.barrier, gridDim.x};
  const int64_t H = a.hidden, I = a.inter;

  auto qkv_gemv = [&](const LayerTable& L) {
    return NormGemv(gemv_args<T>(a, L.qkv, L.qkv_bias, a.h, a.qkv, a.qkv_out, H, a.split.qkv, L.input_norm, nullptr),
                    block, grid);
  };
  NormGemv qkv = qkv_gemv(a.layers[0]);
  qkv.load_first();
  qkv.prefetch_l2(true);
  for (int l = 0; l < a.num_layers; ++l) {
    const LayerTable& L = a.layers[l];
    PlainGemv o(gemv_args<T>(a, L.o, L.o_bias, a.attn_out, a.proj, H, a.attn_width, a.split.o, nullptr, a.h), block, grid);
    SwiGluGemv gu(gemv_args<T>(a, L.gate_up, L.gate_up_bias, a.h, a.act, I, H, a.split.gate_up, L.post_norm, nullptr),
                  block, grid);
    PlainGemv down(gemv_args<T>(a, L.down, L.down_bias, a.act, a.branch, H, I, a.split.down, nullptr, a.h), block, grid);

    bar.sync();  // h
    qkv.run();
    o.prefetch_l2(false);
    gu.prefetch_l2(false);
    down.prefetch_l2(false);

    bar.sync();  // qkv
    DecodeParams<T> p = a.attn;
    p.kpool = static_cast<const T*>(L.k_pool);
    p.vpool = static_cast<const T*>(L.v_pool);
    p.window = L.window;
    p.fused.q_norm = L.q_norm;
    p.fused.k_norm = L.k_norm;
    p.fused.k_pool = L.k_pool;
    p.fused.v_pool = L.v_pool;
    switch (a.kG) {
      case 1: attention_items<T, kD, kVec, kLanes, 1>(p, a.attn_items, block, grid); break;
      case 2: attention_items<T, kD, kVec, kLanes, 2>(p, a.attn_items, block, grid); break;
      case 4: attention_items<T, kD, kVec, kLanes, 4>(p, a.attn_items, block, grid); break;
      default: attention_items<T, kD, kVec, kLanes, 8>(p, a.attn_items, block, grid); break;
    }
    o.load_first();

    bar.sync();  // attn
    o.run();
    gu.load_first();

    bar.sync();  // h
    gu.run();
    down.load_first();
    if (l + 1 < a.num_layers) {
      qkv = qkv_gemv(a.layers[l + 1]);
      qkv.prefetch_l2(false);
    }

    bar.sync();  // act
    down.run();
    if (l + 1 < a.num_layers) qkv.load_first();
  }
  NormGemv lm(gemv_args<T>(a, a.lm_head, nullptr, a.h, a.logits, a.vocab, H, a.split.lm_head, a.final_norm, nullptr),
              block, grid);
  lm.load_first();
  bar.sync();  // h
  lm.run();
  bar.leave();
}

using Bf16 = gpu_bf16;

// Calls f(rows_tag, kd, kvec, klanes) with the kernel's template arguments.
template <typename F> void with_step_shape(int64_t rows, int head_dim, F&& f) {
  with_decode_shape<Bf16>(head_dim, [&](auto kd, auto kvec, auto klanes) {
    if constexpr (decltype(kd)::value == 64 || decltype(kd)::value == 128) {
      if (rows == 1) f(std::integral_constant<int, 1>{}, kd, kvec, klanes);
      else if (rows == 2) f(std::integral_constant<int, 2>{}, kd, kvec, klanes);
      else if (rows <= 4) f(std::integral_constant<int, 4>{}, kd, kvec, klanes);
      else f(std::integral_constant<int, 8>{}, kd, kvec, klanes);
    } else {
      throw_error(ErrorKind::kUnsupported, "the persistent decode step takes head_dim 64 or 128");
    }
  });
}

// The kernel's static shared memory (attention and GEMV reductions, a few
// tens of KiB) is bounded by this when checking that the dynamic part fits.
constexpr std::size_t kStaticSmemAllowance = 64u << 10;

std::size_t norm_bytes(int64_t rows, int64_t hidden) {
  return static_cast<std::size_t>(rows * hidden) * sizeof(Bf16);
}

bool is_bf16_on(const Tensor& t, const Device& device) {
  return t.defined() && t.dtype() == DType::kBF16 && t.device() == device && aligned16(t.raw_data());
}
bool optional_bf16_on(const Tensor& t, const Device& device) { return !t.defined() || is_bf16_on(t, device); }

}  // namespace
}  // namespace gpu

struct DecodeStep::State {
  Device device;
  Tensor table;    // LayerTable[layers] (U8)
  Tensor barrier;  // kBarrierWords x U32 (I32 storage), zeroed
  std::vector<PagedKVLayer> cache;  // the pools the table points into (kept alive)
  DecodeModelWeights model;
};

bool decode_step_supported(const DecodeModelWeights& model, int64_t rows) {
  using namespace gpu;
  if (rows < 1 || rows > kDecodeStepMaxRows || model.layers.empty() || !model.lm_head.defined()) return false;
  const Device device = model.lm_head.device();
  if (!device.is_gpu() || model.attention.dtype != DType::kBF16) return false;
  const AttentionSpec& s = model.attention;
  if ((s.head_dim != 64 && s.head_dim != 128) || s.kv_heads <= 0 || s.heads % s.kv_heads != 0) return false;
  const int64_t H = model.lm_head.size(1);
  const DeviceLimits lim = device_limits(device.index);
  if (!lim.cooperative || norm_bytes(rows, H) + kStaticSmemAllowance > lim.smem_optin) return false;
  if (!is_bf16_on(model.lm_head, device) || !is_bf16_on(model.final_norm, device)) return false;
  for (const DecodeLayerWeights& L : model.layers) {
    for (const Tensor* t : {&L.input_norm, &L.qkv, &L.o, &L.post_norm, &L.gate_up, &L.down})
      if (!is_bf16_on(*t, device) || t->size(-1) % kVec16<Bf16> != 0) return false;
    for (const Tensor* t : {&L.qkv_bias, &L.q_norm, &L.k_norm, &L.o_bias, &L.gate_up_bias, &L.down_bias})
      if (!optional_bf16_on(*t, device)) return false;
  }
  return true;
}

DecodeStep::DecodeStep(const DecodeModelWeights& model, const std::vector<PagedKVLayer>& cache)
    : state_(std::make_unique<State>()) {
  using namespace gpu;
  if (!decode_step_supported(model, 1)) throw_error(ErrorKind::kUnsupported, "the persistent decode step cannot run this model");
  if (cache.size() != model.layers.size()) throw_invalid("the paged KV cache was made for another model");
  State& st = *state_;
  st.device = model.lm_head.device();
  st.model = model;
  st.cache = cache;
  std::vector<LayerTable> host(model.layers.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    const DecodeLayerWeights& L = model.layers[i];
    auto ptr = [](const Tensor& t) -> const void* { return t.defined() ? t.raw_data() : nullptr; };
    LayerTable& e = host[i];
    e.input_norm = ptr(L.input_norm);
    e.qkv = ptr(L.qkv);
    e.qkv_bias = ptr(L.qkv_bias);
    e.q_norm = ptr(L.q_norm);
    e.k_norm = ptr(L.k_norm);
    e.o = ptr(L.o);
    e.o_bias = ptr(L.o_bias);
    e.post_norm = ptr(L.post_norm);
    e.gate_up = ptr(L.gate_up);
    e.gate_up_bias = ptr(L.gate_up_bias);
    e.down = ptr(L.down);
    e.down_bias = ptr(L.down_bias);
    PagedKVLayer layer = cache[i];
    e.k_pool = layer.k.mutable_raw_data();
    e.v_pool = layer.v.mutable_raw_data();
    AttentionSpec spec = model.attention;
    spec.sliding_window = L.sliding_window;
    e.window = decode_window(spec);
  }
  const std::size_t bytes = host.size() * sizeof(LayerTable);
  st.table = empty_tensor(Shape{static_cast<int64_t>(bytes)}, DType::kU8, st.device);
  copy_bytes(st.table.mutable_raw_data(), st.device, host.data(), Device::cpu(), bytes);
  st.barrier = empty_tensor(Shape{kBarrierWords}, DType::kI32, st.device);
  const std::vector<int32_t> zeros(kBarrierWords, 0);
  copy_bytes(st.barrier.mutable_raw_data(), st.device, zeros.data(), Device::cpu(), zeros.size() * sizeof(int32_t));
}

DecodeStep::~DecodeStep() = default;

bool DecodeStep::made_for(const std::vector<PagedKVLayer>& cache) const {
  const std::vector<PagedKVLayer>& mine = state_->cache;
  if (cache.size() != mine.size()) return false;
  for (std::size_t i = 0; i < cache.size(); ++i)
    if (cache[i].k.raw_data() != mine[i].k.raw_data() || cache[i].v.raw_data() != mine[i].v.raw_data()) return false;
  return true;
}

bool DecodeStep::supports_rows(int64_t rows) const {
  const gpu::DeviceLimits lim = gpu::device_limits(state_->device.index);
  return rows >= 1 && rows <= kDecodeStepMaxRows &&
         gpu::norm_bytes(rows, state_->model.lm_head.size(1)) + gpu::kStaticSmemAllowance <= lim.smem_optin;
}

void DecodeStep::run(DecodeStepBuffers& buf, const PagedBatch& batch, const Tensor& inv_freq,
                     float attention_scaling) const {
  using namespace gpu;
  State& st = *state_;
  const DecodeModelWeights& m = st.model;
  const int64_t rows = batch.num_seqs;
  if (!is_decode(batch) || !supports_rows(rows))
    throw_invalid("the persistent decode step takes 1 to 8 sequences of one token each");
  const int device = st.device.index;
  const DeviceLimits lim = device_limits(device);
  const int64_t H = m.lm_head.size(1), I = m.layers[0].down.size(1), V = m.lm_head.size(0);
  const int64_t qkv_out = m.layers[0].qkv.size(0), attn_width = m.layers[0].o.size(1);
  const std::size_t smem = norm_bytes(rows, H);

  StepArgs<Bf16> a{};
  a.layers = static_cast<const LayerTable*>(st.table.raw_data());
  a.num_layers = static_cast<int>(m.layers.size());
  a.rows = static_cast<int>(rows);
  a.hidden = H;
  a.inter = I;
  a.qkv_out = qkv_out;
  a.attn_width = attn_width;
  a.vocab = V;
  a.eps = static_cast<float>(m.eps);
  a.mode = round_mode(DType::kBF16);
  const DecodePlan plan = decode_plan(batch, m.attention);
  a.kG = plan.kG;
  float* scratch = buf.scratch && buf.scratch->defined() ? static_cast<float*>(buf.scratch->mutable_raw_data()) : nullptr;
  if (plan.splits > 1 && !scratch) throw_invalid("the decode step needs the split-K scratch");
  a.h = static_cast<Bf16*>(buf.hidden.mutable_raw_data());
  a.qkv = static_cast<Bf16*>(buf.qkv.mutable_raw_data());
  a.attn_out = static_cast<Bf16*>(buf.attn.mutable_raw_data());
  a.proj = static_cast<Bf16*>(buf.proj.mutable_raw_data());
  a.act = static_cast<Bf16*>(buf.act.mutable_raw_data());
  a.branch = static_cast<Bf16*>(buf.branch.mutable_raw_data());
  a.logits = static_cast<Bf16*>(buf.logits.mutable_raw_data());
  a.final_norm = static_cast<const Bf16*>(m.final_norm.raw_data());
  a.lm_head = static_cast<const Bf16*>(m.lm_head.raw_data());
  a.barrier = static_cast<unsigned*>(st.barrier.mutable_raw_data());

  with_step_shape(rows, static_cast<int>(m.attention.head_dim), [&](auto rows_tag, auto kd, auto kvec, auto klanes) {
    constexpr auto kernel = decode_step_kernel<Bf16, decltype(rows_tag)::value, decltype(kd)::value,
                                               decltype(kvec)::value, decltype(klanes)::value>;
    // More than the 48 KiB every kernel may take needs the kernel's opt-in
    // (what fits beside its static shared memory: decode_step_supported).
    if (smem > (48u << 10)) {
#if defined(HIPFORMERS_WITH_CUDA)
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
            "cudaFuncSetAttribute(decode_step_kernel)");
#endif
    }
    // The grid: every block resident (cooperative), one block per SM times what fits.
    int per_sm = 0;
#if defined(HIPFORMERS_WITH_CUDA)
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvThreads, smem),
          "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
#else
    check(hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvThreads, smem),
          "hipOccupancyMaxActiveBlocksPerMultiprocessor");
#endif
    if (per_sm < 1) throw_error(ErrorKind::kUnsupported, "the persistent decode step does not fit on this GPU");
    const int64_t blocks = static_cast<int64_t>(lim.sms) * std::min(per_sm, 2);
    const int warp = lim.warp;  // the device's width (kWarp is the device pass's)
    const int warps = kGemvThreads / warp;
    const int64_t target = blocks * warps;  // about one warp task per warp of the grid
    auto split_for = [&](int64_t out_f, int64_t in_f, int output) {
      return gemv_split(gemv_groups(out_f, output), in_f / kVec16<Bf16>, warps, warp, target);
    };
    a.split.qkv = split_for(qkv_out, H, kOutputPlain);
    a.split.o = split_for(H, attn_width, kOutputPlain);
    a.split.gate_up = split_for(I, H, kOutputSwiGLU);
    a.split.down = split_for(H, I, kOutputPlain);
    a.split.lm_head = split_for(V, H, kOutputPlain);

    AttentionSpec spec = m.attention;
    spec.sliding_window.reset();
    a.attn = decode_params<Bf16>(batch, spec, plan, a.qkv, st.cache[0], a.attn_out, scratch);
    a.attn.fused.rope = qk_norm_rope_args(inv_freq, spec.head_dim, m.eps, attention_scaling, spec.dtype);
    a.attn_items = plan.splits * static_cast<int>(spec.kv_heads) * plan.head_chunks * static_cast<int>(rows);

    launch_cooperative(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kGemvThreads), smem, stream_for(device), a);
  });
  check_launch("decode_step");
}

}  // namespace hipformers::kernels
