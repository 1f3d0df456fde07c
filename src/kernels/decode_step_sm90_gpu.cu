// The persistent decode step (decode_step.h) on CUDA sm_90: one cooperative
// launch of one block per SM runs every op of a one-token step.
//
// Ops, in order: per layer  qkv (GEMV) -> attention -> o (GEMV) ->
// gate|up (GEMV) -> down (GEMV); then lm_head (GEMV + argmax). Op k starts
// once every block has finished op k - 1: done[k - 1] (a global counter,
// one arrival per block) reaches the grid size. Thread 0 of a block spins on
// it with an acquire load; the block's consumer warps then read what op
// k - 1 wrote through L2 (__ldcg: another SM wrote it, this SM's L1 may hold
// an older line).
//
// A block is 8 consumer warps and one producer warp. The producer walks the
// same op list and, for every GEMV, bulk-copies the block's weight tiles
// (tiles b, b + G, ...: up to 8 rows of <= 16 KB together, one copy a row
// from as many lanes, each row to a slot kRowPad bytes longer than it) into
// a ring of kStages shared-memory stages, guarded by two mbarriers per stage
// ("full": the copy landed; "empty": all 8 consumer warps are done with it).
// Weights depend on nothing, so the producer runs ahead across op
// boundaries while the consumers wait: the memory system never idles at a
// grid-wide barrier.
//
// GEMV (y = W x, fp32 sums): the op's input x is staged once per block in
// shared memory as bf16, transformed on the way in: rms_norm(x) * w
// (rounded as rms_norm rounds: round(w * round(x / rms))) for qkv, gate|up
// and lm_head; plain for o (attention output) and down (the SwiGLU output).
// A tile runs on the tensor cores (tile_part_mma: mma.sync m16n8k16 with x
// in A and 8 weight rows as B, loaded by ldmatrix from the padded slots;
// with tile_segments, a tile of R < 8 rows fills B's 8 columns with its
// rows' 8 / R input segments instead, A's rows holding x's segments); the
// consumer warps form tile groups that take the tiles in turn,
// a group's warps splitting the tile's 32-input blocks, their sums meeting
// in shared memory. Epilogues: qkv stores; o and down
// add into the residual stream, hidden = round(round(y) + hidden) (layer 0's
// o reads the embedding row as the old residual: the embedding itself is
// never stored); gate|up tiles hold R/2 gate rows and the same R/2 up rows
// and store act = round(round(silu(round(g))) * round(u)); lm_head stores the
// logits and keeps the largest argmax key (gpu/argmax_key.h), combined by
// atomicMax; the last block to finish the step writes next = argmax.
//
// Attention, while a kv head's K and V pages fit the ring at once (up to 256
// keys): one block per kv head takes them all (attention_whole, below).
// Longer sequences, or HIPFORMERS_PERSISTENT_ATTENTION=split: per (kv head,
// page of keys) item, q/k RMSNorm + RoPE of the new
// token (gpu/qk_norm_rope.h, the same device code as the per-kernel path),
// the new key and value written to the cache by the item holding position
// pos, scores s_j = scale q.k_j, probabilities e^(s_j - m_page) rounded to
// bf16, acc = sum p_j v_j, stored as a split partial (m, l, acc). The
// producer streams each item's K and V pages into the ring like weight
// tiles (the keys before pos depend on nothing of this step), so the op
// waits for no memory but this step's q|k|v. The o projection's staging
// merges the splits: out = sum_q acc_q e^(m_q - M) / sum_q l_q e^(m_q - M);
// with HIPFORMERS_PERSISTENT_MERGE=attention, the block finishing a kv
// head's last split merges them instead, and the o op stages bf16 values.
//
// With the flagged exchange (the default; its own instantiation of the
// kernel), no op waits on the done counters: each op's outputs go out as
// flagged words that the next op polls (see "the flagged exchange" below);
// HIPFORMERS_PERSISTENT_EXCHANGE=counters takes the counters instead.
//
// HIPFORMERS_PERSISTENT_TRACE and HIPFORMERS_PERSISTENT_ABLATE are developer
// tools for finding where the step's time goes (g_trace*, kAblate*).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "backend.h"
#include "gpu/argmax_key.h"
#include "gpu/bulk_copy.h"
#include "gpu/flagged_words.h"
#include "gpu/gpu_types.h"
#include "gpu/paged_decode.h"  // load_vec
#include "gpu/prefill_mma.h"   // ldmatrix_x4, mma16816
#include "gpu/qk_norm_rope.h"
#include "hipformers/core/error.h"
#include "hipformers/kernels/decode_step.h"

namespace hipformers::kernels::gpu {
namespace {

using bf16 = gpu_bf16;

constexpr int kConsumerWarps = 8;
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kThreads = kConsumers + 32;  // + the producer warp
// The traced kernel has one more warp, the prober (trace_probes). Up to 12
// warps a block, a thread may still hold 168 registers (3 warps on each of
// an SM's 4 schedulers), so the extra warp costs the consumers nothing.
constexpr int kThreadsTraced = kThreads + 32;
constexpr int kStages = 8;
constexpr int kDefaultInflight = 2;  // Params::inflight
// A weight tile's rows lie kRowPad bytes apart beyond their length, so the
// 8 rows an ldmatrix reads fall on different banks (gemv_tiles); a stage
// holds 8 padded rows of 1024 values or one 64-key page of K or V.
constexpr int kRowPad = 16;
constexpr int kStageBytes = 16384 + 8 * kRowPad;
constexpr int kMaxIn = 8192;  // the longest staged input: H, I or heads * D
constexpr int kMaxLayers = 64;
constexpr int kMaxGroup = 8;  // query heads per kv head (one warp each)
constexpr int kMaxD = 128;
// The aux ring: an op's small HBM-resident operands (its RMSNorm weight, or
// the attention's q/k norm weights), copied ahead by the producer like its
// weight tiles. Read by the consumers directly, they would wait behind every
// bulk copy in flight at the memory controllers (~5 us a load when the ring
// is full); from the ring they are in shared memory when the op starts.
constexpr int kAuxSlots = 2;
constexpr int kMaxH = 4096;
constexpr int kAuxElems = kMaxH > 2 * kMaxD ? kMaxH : 2 * kMaxD;
constexpr int kPageKeys = static_cast<int>(kKVPageSize);
constexpr int kKeysPerWarp = kPageKeys / kConsumerWarps;
static_assert(kPageKeys == 64 && kKeysPerWarp == 8, "attention items are one 64-key page");

enum OpKind : int { kOpQkv = 0, kOpAttention = 1, kOpO = 2, kOpGateUp = 3, kOpDown = 4, kOpLmHead = 5 };
constexpr int kOpsPerLayer = 5;

struct Layer {
  const bf16 *input_norm, *qkv, *q_norm, *k_norm, *o, *post_norm, *gate_up, *down;
  bf16 *k_pool, *v_pool;
};

struct Params {
  Layer layers[kMaxLayers];
  const bf16 *embed, *final_norm, *lm_head;
  const int32_t *ids, *seq_lens, *block_table;
  bf16 *hidden, *qkv, *act, *logits;
  int32_t* next;
  unsigned* done;           // [n_ops]
  unsigned* exit_count;     // [1]
  unsigned long long* best; // [1]
  float* partial;           // [kv_heads][max_splits][group][D + 2]
  unsigned* merge_count;    // [kv_heads]: the splits of a kv head done (merge_in_attention)
  bf16* attn_out;           // [heads D]: the merged attention output (merge_in_attention)
  QkNormRope rope;
  float eps, scale;
  int n_layers, H, I, V, heads, kv_heads, D, max_splits;
  bool l2_hint;  // weight copies evict first (HIPFORMERS_PERSISTENT_L2_HINT=0 turns it off, for A/B)
  // Copies a producer keeps in flight (HIPFORMERS_PERSISTENT_INFLIGHT,
  // default kDefaultInflight; 0: as many as the ring has free stages). After
  // a grid-wide wait every producer refilled its whole ring at once, ~17 MB
  // queued at the memory controllers, and the step's latency-bound loads (the
  // flagged polls of the next hand-off, the attention's K/V pages) waited
  // behind that queue; fewer copies in flight keep the queue short while
  // still covering the memory latency (H100: 2 copies 0.753-0.763 ms a step,
  // 1: 0.771, 3: 0.768, unlimited 0.776; docs/PERFORMANCE.md).
  int inflight;
  // Tile groups (HIPFORMERS_PERSISTENT_TILE_GROUPS = 1, 2, 4 or 8; log2 here):
  // the consumer warps split into groups that take an op's tiles in turn,
  // each tile's inputs split over its group's warps, so up to that many
  // tiles run at once.
  int tile_groups_log2;
  unsigned ablate;  // kAblate* bits (HIPFORMERS_PERSISTENT_ABLATE); 0 in every real run
  // Where a kv head's splits merge (HIPFORMERS_PERSISTENT_MERGE): false, in
  // the o projection's staging (every block reads every partial); true, in
  // the attention op, by the block that finishes the kv head's last split
  // (a counter per kv head), so the o op stages a plain bf16 vector.
  bool merge_in_attention;
  // Whole-head attention (the default; HIPFORMERS_PERSISTENT_ATTENTION=split
  // turns it off; implies merge_in_attention): while a kv head's K and V pages all fit the ring
  // at once (2 pages <= stages), one block per kv head takes every key,
  // one key a lane, and merges its warps in shared memory: no split
  // partials, no merge by another block (attention_whole).
  bool whole_heads;
  // Blocks per kv head in whole-head attention (a divisor of the query heads
  // per kv head): each takes that share of the kv head's query heads
  // against all its keys, so the op's critical path (one block's serial
  // scores and p . v) is that much shorter; the K and V pages are copied
  // into each of them. By default one query head a block while the heads
  // fit the grid (Qwen3-0.6B on an H100: 0.850 -> 0.802 ms a step, parts 2
  // against 1; docs/PERFORMANCE.md); HIPFORMERS_PERSISTENT_HEAD_PARTS sets it.
  int head_parts;
  // RoPE's coefficients, which depend on the position alone, computed in
  // layer 0's whole-head attention and kept in shared memory for the later
  // layers, instead of loading inv_freq from memory in every layer (the
  // profile's attention blocks waited on those loads): H100 0.756 -> 0.741 ms
  // a step. The default; HIPFORMERS_PERSISTENT_ROPE_ONCE=0 turns it off (A/B),
  // read at every launch.
  bool rope_once;
  // Whole-head attention's K and V pages asked into L2 (prefetch_l2) this
  // many ops before their attention op, when the producer reaches that op
  // (HIPFORMERS_PERSISTENT_KV_PREFETCH, read per launch; 0, the default:
  // never; 6 measured within noise of off on an H100): the pages' bulk copies,
  // issued a few stages ahead of the consumers, queue behind every SM's
  // weight copies (~12 us from issue to landing on an H100) and the
  // attention, on the step's critical path, waited for them.
  int kv_prefetch;
  // Tiles of fewer than 8 rows (o, down for Qwen3-0.6B) fill mma's 8 B
  // columns with their rows' input segments (tile_lanes;
  // HIPFORMERS_PERSISTENT_TILE_SEGMENTS=1, read per launch): a quarter or
  // half the mma steps. Off by default: its first build measured slower on
  // an H100 (0.748-0.760 ms a step against 0.729-0.739; docs/PERFORMANCE.md).
  bool tile_segments;
  // The flagged exchange (the default; HIPFORMERS_PERSISTENT_EXCHANGE=counters
  // for the other; the decode_step_kernel<..., true> instantiation): the ops' outputs go out as
  // flagged words (below) instead of hidden, qkv, act and attn_out, and no
  // op waits on the done counters. Implies merge_in_attention.
  uint32_t *hidden_f, *qkv_f, *act_f, *attn_f;
  unsigned* step_counter;  // [1]: steps run, for the flags' tags
  // A test's switch (HIPFORMERS_PERSISTENT_JITTER=1, flagged exchange only):
  // each block sleeps a pseudo-random 0-4 us before each op, so the blocks
  // run the ops in many relative orders and a schedule the exchange's
  // argument missed shows up as a wrong value or a trapped poll.
  bool jitter;
};

// ---- the flagged exchange ------------------------------------------------------
// (gpu/flagged_words.h: the words, their tags, their loads and stores)
// Reuse is safe with one buffer per kind: no block can write a buffer's next
// values before every block has read its current ones, since the op that
// writes them next depends, through the ops in between, on outputs every
// reading block makes only after that read (a block with no tile of an op
// reads none of its input). A word's previous tag differs from the awaited
// one by fewer than the step's ops.
//
// Op k's tags: its inputs', its outputs', and the residual rows' it adds to
// (o, down); an input tag of 0 polls nothing.
struct Tags {
  uint32_t in = 0, out = 0, residual = 0;
  int k = 0;
};

// Ablations, a developer tool for finding where the step's time goes: each
// bit leaves one kind of work out of every op, so the step's time without
// it can be compared with the full step's. The outputs are WRONG with any
// bit set (the next id is still a valid token id, so generation runs on);
// only the timing means anything. The ring protocol and the grid's
// counters run as always, so the weight stream is the same.
constexpr unsigned kAblateNoWait = 1;       // ops do not wait for the op before (no grid-wide dependency)
constexpr unsigned kAblateNoStage = 2;      // GEMV ops do not stage their input (no norm, no L2 round trip)
constexpr unsigned kAblateNoTileMath = 4;   // GEMV tiles are taken and given back, not multiplied
constexpr unsigned kAblateNoAttention = 8;  // attention items take their K/V stages only; o merges nothing
constexpr unsigned kAblateNoStores = 16;    // GEMV epilogues compute but store nothing (nor load the residual)
// Even with every bit (31), a tile split over warps (o, down) keeps its
// barrier and shared-memory sum, and every op its staging barriers.

// A developer tool: with HIPFORMERS_PERSISTENT_TRACE set, the traced
// instantiation of the kernel runs (decode_step_kernel<true, F>), whose
// block 0 stores when its wait for op k returned (start) and when its share
// of op k was done (end), and how long it waited on the ring both ways;
// printed at exit (print_trace) for the last step. Every g_trace* value is
// in SM cycles unless said.
constexpr int kMaxOps = kMaxLayers * 5 + 1;
__device__ unsigned long long g_trace[2 * kMaxOps];
// [2k]: block 0's consumer thread 0 waiting for op k's stages to land (the
// ring ran empty); [2k + 1]: block 0's producer blocked on a full ring while
// issuing op k's copies.
__device__ unsigned long long g_trace_stall[2 * kMaxOps];
// [k]: block 0's timer when op k's input was staged (GEMV ops).
__device__ unsigned long long g_trace_staged[kMaxOps];
// [k]: block 0's thread 0's timer when its staging loads of op k had
// returned (GEMV ops; o: the first chunk of split partials).
__device__ unsigned long long g_trace_loaded[kMaxOps];
// [k][b][0, 1]: when block b's wait for op k returned and when its share of
// op k was done (blocks below kMaxTraceBlocks): which blocks an op waits for.
constexpr int kMaxTraceBlocks = 192;
__device__ unsigned long long g_trace_blocks[kMaxOps * kMaxTraceBlocks * 2];
// [4i .. 4i + 3]: probe i of block 0's prober warp, which times, over and
// over while the step runs, one load that hits L2 (a counter), one that
// must come from HBM (a line of the lm_head read with an evict-first
// policy) and one read of the global timer: its cycle counter when it
// began, then the three latencies in cycles. What a round trip costs while
// the weight stream runs, without slowing the consumers (a warp of its own).
constexpr int kMaxProbes = 4096;
__device__ unsigned long long g_trace_probe[4 * kMaxProbes];
__device__ int g_trace_probes;  // how many were taken
// [layer][e]: the first whole-head attention block's (the grid's last
// block) events in its own cycles: kAttn* below; what its share of the op
// waits for (q|k|v, K and V pages) and how long its copies took to land.
enum AttnEvent : int {
  kAttnStart,       // the op begins (consumer thread 0)
  kAttnQkvIn,       // this step's q|k|v are in shared memory
  kAttnRoped,       // q/k norm + RoPE done, the new key and value in place
  kAttnKLanded,     // warp 0's K page in the ring
  kAttnScored,      // warp 0's scores and softmax done
  kAttnVLanded,     // + page q (4): page q's V in the ring (its first warp)
  kAttnEnd = kAttnVLanded + 4,  // the outputs stored
  kAttnKIssued,     // the producer issued K page 0
  kAttnVIssued,     // + page q (4): the producer issued V page q
  kAttnPosScored = kAttnVIssued + 4,  // the warp holding key pos: its scores and softmax done
  kAttnPvDone,      // warp 0's p . v done
  kAttnPosPvDone,   // the warp holding key pos: its p . v done
  kAttnMerge,       // the warps' barrier before the merge passed (thread 0)
  kAttnNormed,      // warp 0's q norm + RoPE done (before the block's barrier)
  kAttnEvents
};
__device__ unsigned long long g_trace_attn[kMaxLayers * kAttnEvents];
// [b][0, 1]: block b's global timer (ns) and cycle counter, read together
// when it starts; [kMaxTraceBlocks][0, 1]: block 0's when it ends.
__device__ unsigned long long g_trace_sync[(kMaxTraceBlocks + 1) * 2];

__device__ __forceinline__ unsigned long long global_timer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// The SM's cycle counter: cheap to read (the global timer is not: its
// reads, when taken per tile, slowed the traced step by ~30%), the same rate
// on every SM but not the same value, so the trace converts cycles to
// nanoseconds and aligns the SMs through one (global timer, cycles) pair
// per block (g_trace_sync).
__device__ __forceinline__ unsigned long long sm_clock() {
  unsigned long long c;
  asm volatile("mov.u64 %0, %clock64;" : "=l"(c));
  return c;
}

// The cycle counter, read once `v` has arrived: a branch on v cannot
// resolve before its load returns, and the counter is read after the branch.
__device__ __forceinline__ unsigned long long sm_clock_after(unsigned v) {
  if (v == 0xdeadbeefu) __trap();
  return sm_clock();
}

// A wait of the step that lasts longer than this is a deadlock (a bug, or a
// block that never became resident): it prints what it waited for and traps,
// so the launch fails with an error instead of hanging the GPU.
constexpr unsigned long long kHangCycles = 1ull << 35;  // ~20 s at 1.7 GHz
enum WaitFor : int { kWaitFreeStage, kWaitFreeAux, kWaitAux, kWaitOp, kWaitFlags };
[[noreturn]] __device__ __noinline__ void hang(int what, int k) {
  const char* names[] = {"a free ring stage, stage", "a free aux slot, op", "the aux operands of op",
                         "the other blocks to finish op", "the flagged inputs of op"};
  printf("hipformers persistent decode step: block %d waited over 2^35 cycles for %s %d; trapping\n",
         static_cast<int>(blockIdx.x), names[what], k);
  __trap();
}
// Every bounded wait: started at t0 (SM cycles), it traps once it is late.
__device__ __forceinline__ void trap_if_late(unsigned long long t0, int what, int k) {
  if (sm_clock() - t0 > kHangCycles) hang(what, k);
}

// mbarrier_wait, bounded.
__device__ __forceinline__ void ring_wait(uint64_t* bar, uint32_t parity, int what, int k) {
  if (mbarrier_try_wait(bar, parity)) return;
  const unsigned long long t0 = sm_clock();
  while (!mbarrier_try_wait(bar, parity)) trap_if_late(t0, what, k);
}

// No pause between a poll's reads: on an H100 a 32 ns pause made the step
// 7% slower (0.939 against 0.877 ms), 8 ns no better (docs/PERFORMANCE.md).
constexpr unsigned kPollPauseNs = 0;

// The flagged exchange's polls: re-read the word or words at p (already
// loaded once into w) until every tag is `tag`; tag 0 takes them as they
// are (the no-wait ablation). k: the op, for the hang report.
template <typename Word>
__device__ __forceinline__ void poll_words(const uint32_t* p, Word& w, uint32_t tag, int k) {
  if (tag == 0 || tagged(w, tag)) return;
  const unsigned long long t0 = sm_clock();
  poll_tagged(p, w, tag, [&] { trap_if_late(t0, kWaitFlags, k); }, kPollPauseNs);
}
// Eight values from the two word vectors at p (loaded once as a, b), polled
// until every tag is `tag`.
__device__ __forceinline__ uint4 poll_flagged8(const uint32_t* p, uint4 a, uint4 b, uint32_t tag, int k) {
  poll_words(p, a, tag, k);
  poll_words(p + 4, b, tag, k);
  return pack_flagged8(a, b);
}
__device__ __forceinline__ float poll_word(const uint32_t* p, uint32_t tag, int k) {
  uint32_t w = load_relaxed1(p);
  poll_words(p, w, tag, k);
  return flagged_value(w);
}

__device__ __forceinline__ unsigned load_evict_first(const void* p, uint64_t policy) {
  unsigned v;
  asm volatile("ld.global.L1::no_allocate.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(policy) : "memory");
  return v;
}

// Shared memory (dynamic), in this order.
struct SmemLayout {
  static constexpr int kRing = kStages * kStageBytes;
  static constexpr int kX = kRing;                                    // bf16 [kMaxIn]
  static constexpr int kRows = kX + kMaxIn * 2;                       // float [8 groups][2][8][8]: tile row sums by part
  static constexpr int kRed = kRows + 8 * 2 * 8 * 8 * 4;              // float [8] block reductions
  static constexpr int kHeads = kRed + 8 * 4;                         // bf16 [kMaxGroup + 2][kMaxD]: q heads, k, v
  static constexpr int kQ = kHeads + (kMaxGroup + 2) * kMaxD * 2;     // float [kMaxGroup][kMaxD]: roped q
  static constexpr int kKV = kQ + kMaxGroup * kMaxD * 4;              // float [2][kMaxD]: the new k, v
  static constexpr int kP = kKV + 2 * kMaxD * 4;                      // float [kMaxGroup][kPageKeys]; whole heads: [warps][kMaxGroup][32]
  static constexpr int kML = kP + kConsumerWarps * kMaxGroup * 32 * 4;  // float [2][kMaxGroup]; whole heads: [2][warps][kMaxGroup]
  static constexpr int kAcc = kML + 2 * kConsumerWarps * kMaxGroup * 4;  // float [8 warps][kMaxGroup * kMaxD]
  static constexpr int kBars = kAcc + kConsumerWarps * kMaxGroup * kMaxD * 4;  // u64 [2][kStages]
  // kHeads .. kBars: the attention area, reused by stage_attention for split partials
  static constexpr int kAttentionBytes = kBars - kHeads;
  static constexpr int kAuxBars = kBars + 2 * kStages * 8;           // u64 [2][kAuxSlots]: aux full, aux empty
  static constexpr int kAux = (kAuxBars + 2 * kAuxSlots * 8 + 15) / 16 * 16;  // bf16 [kAuxSlots][kAuxElems]
  static constexpr int kRope = kAux + kAuxSlots * kAuxElems * 2;  // float [4][32]: RoPE's coefficients (rope_once)
  static constexpr int kTotal = kRope + 4 * 32 * 4;
};
static_assert(SmemLayout::kBars % 8 == 0, "mbarriers are 8-byte aligned");
static_assert(SmemLayout::kTotal <= 227 * 1024, "the dynamic shared memory of one block on sm_90");
static_assert(SmemLayout::kAux % 16 == 0, "bulk copies land 16-byte aligned");

// done[k] += 1, ordered after every store the block made before (the
// consumers' barrier makes them this thread's, the release publishes them).
__device__ __forceinline__ void arrive_release(unsigned* counter) {
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
}

__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory"); }

__device__ __forceinline__ int op_kind(int k, int n_layers) {
  return k == kOpsPerLayer * n_layers ? kOpLmHead : k % kOpsPerLayer;
}

// Rows per tile for an input of `in` values: the most of 8, 4, 2, 1 whose
// tile (padded rows) fits a stage.
__device__ __forceinline__ int tile_rows(int in) {
  int r = 8;
  while (r > 1 && r * (in * 2 + kRowPad) > kStageBytes) r /= 2;
  return r;
}

struct Gemv {
  const bf16* w;
  int out, in, rows, tiles;  // gate|up: out = I (row pairs), tiles of rows / 2 pairs
  bool pairs;
};

__device__ __forceinline__ Gemv gemv_of(const Params& p, int k) {
  const int kind = op_kind(k, p.n_layers);
  const Layer* L = kind == kOpLmHead ? nullptr : &p.layers[k / kOpsPerLayer];
  Gemv g{};
  switch (kind) {
    case kOpQkv: g = {L->qkv, (p.heads + 2 * p.kv_heads) * p.D, p.H, 0, 0, false}; break;
    case kOpO: g = {L->o, p.H, p.heads * p.D, 0, 0, false}; break;
    case kOpGateUp: g = {L->gate_up, p.I, p.H, 0, 0, true}; break;
    case kOpDown: g = {L->down, p.H, p.I, 0, 0, false}; break;
    default: g = {p.lm_head, p.V, p.H, 0, 0, false}; break;
  }
  g.rows = tile_rows(g.in);
  const int per_tile = g.pairs ? g.rows / 2 : g.rows;
  g.tiles = (g.out + per_tile - 1) / per_tile;
  return g;
}

__device__ __forceinline__ float bf16_round(float v) { return round_to(v, kRoundBF16); }

// Op k's aux operands (none: n == 0): up to two runs copied back to back.
struct Aux {
  const bf16* src[2];
  int n[2];
};
__device__ __forceinline__ Aux aux_of(const Params& p, int k) {
  const int kind = op_kind(k, p.n_layers);
  const Layer* L = kind == kOpLmHead ? nullptr : &p.layers[k / kOpsPerLayer];
  switch (kind) {
    case kOpQkv: return {{L->input_norm, nullptr}, {p.H, 0}};
    case kOpGateUp: return {{L->post_norm, nullptr}, {p.H, 0}};
    case kOpLmHead: return {{p.final_norm, nullptr}, {p.H, 0}};
    case kOpAttention:
      if (L->q_norm && L->k_norm) return {{L->q_norm, L->k_norm}, {p.D, p.D}};
      return {{nullptr, nullptr}, {0, 0}};  // (decode_step_supported: both or neither)
    default: return {{nullptr, nullptr}, {0, 0}};
  }
}

// ---- the producer --------------------------------------------------------------
// The attention items of a step: (kv head g, page `split` of the sequence),
// item = split * kv_heads + g, block b taking items b, b + G, ...; len:
// the sequence's length, read once per step (seq_lens[0]).
__device__ __forceinline__ int attention_splits(const Params& p, int len) {
  return min((len + kPageKeys - 1) / kPageKeys, p.max_splits);
}
// Whether this step's attention runs whole heads (attention_whole): its
// pages, K and V, fit the ring at once; the same answer in the producer and
// the consumers (both read len from seq_lens).
__device__ __forceinline__ bool whole_heads(const Params& p, int len) {
  return p.whole_heads && 2 * ((len + kPageKeys - 1) / kPageKeys) <= kStages &&
         p.kv_heads * p.head_parts <= static_cast<int>(gridDim.x) && p.heads / p.kv_heads <= kMaxGroup;
}
// The part of a kv head whole-head attention gives block b (-1: none): kv
// head w / head_parts, its query heads' part w % head_parts, w counted from
// the last block (the last blocks hold the fewest q|k|v and o tiles).
__device__ __forceinline__ int whole_head_of(const Params& p, int b) {
  const int w = static_cast<int>(gridDim.x) - 1 - b;
  return w < p.kv_heads * p.head_parts ? w : -1;
}

// Where kv head g's keys of the sequence's page `page` start in a layer's
// K or V pool (in elements): pages of kPageKeys rows of D, kv heads
// interleaved per page.
__device__ __forceinline__ int64_t kv_page_offset(const Params& p, int page, int g) {
  return (static_cast<int64_t>(p.block_table[page]) * p.kv_heads + g) * kPageKeys * p.D;
}

// The producer warp: every lane walks the op list (uniform control flow);
// lane 0 issues the single copies and arms the barriers, and a weight tile's
// rows (one bulk copy each, to padded row slots) go out from lanes 0..n-1.
template <bool kTrace>
__device__ void produce(const Params& p, unsigned char* ring, uint64_t* full, uint64_t* empty, bf16* aux,
                        uint64_t* aux_full, uint64_t* aux_empty) {
  const int G = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int n_ops = kOpsPerLayer * p.n_layers + 1;
  int i = 0;
  const bool timing = kTrace && b == 0 && lane == 0;
  unsigned long long blocked = 0;
  auto next_stage = [&]() {
    const int s = i % kStages, use = i / kStages;
    if (use > 0) {
      const unsigned long long t0 = timing ? sm_clock() : 0;
      ring_wait(&empty[s], (use - 1) & 1, kWaitFreeStage, s);
      if (timing) blocked += sm_clock() - t0;
    }
    // at most p.inflight copies in flight: copy i - inflight has landed
    // (its stage is not reused before copy i, so its full barrier is still
    // at that use's phase or past it)
    if (p.inflight > 0 && i >= p.inflight) {
      const int j = i - p.inflight;
      ring_wait(&full[j % kStages], (j / kStages) & 1, kWaitFreeStage, j % kStages);
    }
    ++i;
    return s;
  };
  auto op_done = [&](int k) {
    if (timing) g_trace_stall[2 * k + 1] = blocked;
    blocked = 0;
  };
  const int nsplit = attention_splits(p, p.seq_lens[0]);
  const bool whole = whole_heads(p, p.seq_lens[0]);
  // Weights are read once a step: their L2 lines go first, so they do not
  // push out what the consumers re-read.
  const bool hint = p.l2_hint;
  const uint64_t policy = l2_evict_first_policy();
  auto copy = [&](void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
    if (hint) bulk_copy_to_shared(dst, src, bytes, bar, policy);
    else bulk_copy_to_shared(dst, src, bytes, bar);
  };
  int aux_i = 0;
  const int w_head = whole ? whole_head_of(p, b) : -1;
  for (int k = 0; k < n_ops; ++k) {
    // this block's K and V pages of the attention kv_prefetch ops ahead
    if (w_head >= 0 && p.kv_prefetch > 0 && lane == 0) {
      const int ka = k + p.kv_prefetch;
      if (ka < n_ops && op_kind(ka, p.n_layers) == kOpAttention) {
        const Layer& L = p.layers[ka / kOpsPerLayer];
        const int g = w_head / p.head_parts;
        const uint32_t bytes = static_cast<uint32_t>(kPageKeys * p.D * 2);
        for (int page = 0; page < nsplit; ++page) {
          prefetch_l2(L.k_pool + kv_page_offset(p, page, g), bytes);
          prefetch_l2(L.v_pool + kv_page_offset(p, page, g), bytes);
        }
      }
    }
    const Aux a = aux_of(p, k);
    if (a.n[0] > 0) {  // the op's norm weights, ahead of its tiles
      const int slot = aux_i % kAuxSlots, use = aux_i / kAuxSlots;
      if (use > 0) {
        const unsigned long long t0 = timing ? sm_clock() : 0;
        ring_wait(&aux_empty[slot], (use - 1) & 1, kWaitFreeAux, k);
        if (timing) blocked += sm_clock() - t0;
      }
      if (lane == 0) {
        const uint32_t b0 = static_cast<uint32_t>(a.n[0] * 2), b1 = static_cast<uint32_t>(a.n[1] * 2);
        mbarrier_arrive_expect_tx(&aux_full[slot], b0 + b1);
        bf16* dst = aux + slot * kAuxElems;
        bulk_copy_to_shared(dst, a.src[0], b0, &aux_full[slot]);
        if (b1) bulk_copy_to_shared(dst + a.n[0], a.src[1], b1, &aux_full[slot]);
      }
      ++aux_i;
    }
    if (op_kind(k, p.n_layers) == kOpAttention) {  // the items' K and V pages, one stage each
      const Layer& L = p.layers[k / kOpsPerLayer];
      // page `page` of kv head g, K (kv 0) or V, into the next stage
      auto copy_page = [&](int page, int g, int kv) {
        const int s = next_stage();
        if (lane != 0) return;
        if (kTrace && whole && whole_head_of(p, b) == 0 && (kv == 1 || page == 0) && page < 4)
          g_trace_attn[(k / kOpsPerLayer) * kAttnEvents + (kv == 0 ? kAttnKIssued : kAttnVIssued + page)] = sm_clock();
        const uint32_t bytes = static_cast<uint32_t>(kPageKeys * p.D * 2);
        const int64_t base = kv_page_offset(p, page, g);
        mbarrier_arrive_expect_tx(&full[s], bytes);
        bulk_copy_to_shared(ring + s * kStageBytes, (kv == 0 ? L.k_pool : L.v_pool) + base, bytes, &full[s]);
      };
      if (whole) {  // the block's kv head: every K page, then every V page
        const int w = whole_head_of(p, b), g = w / p.head_parts;
        if (w >= 0)
          for (int kv = 0; kv < 2; ++kv)
            for (int page = 0; page < nsplit; ++page) copy_page(page, g, kv);
      } else {  // items (page `split` of kv head g): its K page, then its V page
        for (int item = b; item < nsplit * p.kv_heads; item += G)
          for (int kv = 0; kv < 2; ++kv) copy_page(item / p.kv_heads, item % p.kv_heads, kv);
      }
      op_done(k);
      continue;
    }
    const Gemv g = gemv_of(p, k);
    const uint32_t row_bytes = static_cast<uint32_t>(g.in) * 2, slot_bytes = row_bytes + kRowPad;
    for (int t = b; t < g.tiles; t += G) {
      const int s = next_stage();
      unsigned char* dst = ring + s * kStageBytes;
      // the tile's n weight rows from row `first` into slots 0 .. n - 1; for
      // gate|up, those are gate rows and the same up rows (from `second`) go
      // into slots half .. half + n - 1
      const int half = g.rows / 2, first = g.pairs ? t * half : t * g.rows;
      const int n = min(g.pairs ? half : g.rows, g.out - first), second = g.out + first;
      const int copies = g.pairs ? 2 * n : n;
      if (lane == 0) mbarrier_arrive_expect_tx(&full[s], static_cast<uint32_t>(copies) * row_bytes);
      __syncwarp();  // armed before any row lands
      if (lane < copies) {
        const bool up = g.pairs && lane >= n;
        const int r = up ? lane - n : lane;
        const int slot = up ? half + r : r;
        copy(dst + slot * slot_bytes, g.w + static_cast<int64_t>(up ? second + r : first + r) * g.in, row_bytes,
             &full[s]);
      }
    }
    op_done(k);
  }
}

// ---- the consumers: staging --------------------------------------------------
// A staged input is laid out as tile_part_mma reads it: for the 32-input
// block j and lane group t (0-3), one 16-byte vector of four bf16 pairs,
// inputs {32j + 2t, 32j + 16 + 2t, 32j + 8 + 2t, 32j + 24 + 2t} (+ 0, 1):
// the four registers of mma's A operand for both 16-input steps of the block
// at once (tile_part_mma), read with one load.
__device__ __forceinline__ int x_word_slot(int chunk) { return chunk == 1 ? 2 : chunk == 2 ? 1 : chunk; }
// Input e's place (in bf16 values).
__device__ __forceinline__ int x_frag_index(int e) {
  const int j = e >> 5, r = e & 31;
  return (((j << 2) + ((r & 7) >> 1)) << 3) + (x_word_slot(r >> 3) << 1) + (r & 1);
}
// Inputs 8v .. 8v + 7 (one 8-input chunk: word t of it goes to lane group t's vector).
__device__ __forceinline__ void store_x_vector(bf16* xs, int v, uint4 val) {
  uint32_t* w = reinterpret_cast<uint32_t*>(xs) + ((v >> 2) << 4) + x_word_slot(v & 3);
  w[0] = val.x;
  w[4] = val.y;
  w[8] = val.z;
  w[12] = val.w;
}

// Sum of the 256 consumer threads' v (every consumer gets it; warp sums
// added in warp order).
// One barrier: its only caller (stage_norm) is followed by the op's own
// barriers before red is written again, so no second barrier guards red.
__device__ __forceinline__ float consumers_sum(float v, float* red) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  v = warp_sum(v);
  if (lane == 0) red[warp] = v;
  consumers_sync();
  float total = 0;
#pragma unroll
  for (int w = 0; w < kConsumerWarps; ++w) total += red[w];
  return total;
}

constexpr int kMaxVec = kMaxIn / 8 / kConsumers;  // 8-value vectors of a staged input per thread

// An op's input: xv[j] <- the 8 values of vector threadIdx.x + j kConsumers
// (those below nv), every load in flight at once; from x through L2 (written
// by other SMs) or, F with xf given, from the flagged words xf, polled until
// their tags are `tag` (k: the op, for a hang report).
template <bool F>
__device__ __forceinline__ void load_input(const bf16* x, const uint32_t* xf, uint32_t tag, int k, int nv,
                                           uint4 (&xv)[kMaxVec]) {
  const int tid = threadIdx.x;
  if constexpr (F) {
    if (xf) {
      uint4 a[kMaxVec], b[kMaxVec];
#pragma unroll
      for (int j = 0; j < kMaxVec; ++j) {
        const int v = tid + j * kConsumers;
        if (v < nv) {
          a[j] = load_relaxed4(xf + 8 * v);
          b[j] = load_relaxed4(xf + 8 * v + 4);
        }
      }
#pragma unroll
      for (int j = 0; j < kMaxVec; ++j) {
        const int v = tid + j * kConsumers;
        if (v < nv) xv[j] = poll_flagged8(xf + 8 * v, a[j], b[j], tag, k);
      }
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < kMaxVec; ++j) {
    const int v = tid + j * kConsumers;
    if (v < nv) xv[j] = __ldcg(reinterpret_cast<const uint4*>(x) + v);
  }
}

// xs = round(w * round(x / rms(x))) for x of n values (n % 8 == 0, n <= kMaxIn).
// loaded: where thread 0 notes when its loads returned (kTrace), or null.
template <bool F>
__device__ void stage_norm(const bf16* x, const uint32_t* xf, uint32_t tag, int k, const bf16* w, int n, float eps,
                           bf16* xs, float* red, unsigned long long* loaded) {
  const int tid = threadIdx.x, nv = n / 8;
  uint4 xv[kMaxVec], wv[kMaxVec];
  load_input<F>(x, xf, tag, k, nv, xv);
#pragma unroll
  for (int j = 0; j < kMaxVec; ++j) {
    const int v = tid + j * kConsumers;
    if (v < nv) wv[j] = reinterpret_cast<const uint4*>(w)[v];  // w: the aux ring (shared memory)
  }
  float ss = 0;
#pragma unroll
  for (int j = 0; j < kMaxVec; ++j) {
    const int v = tid + j * kConsumers;
    if (v < nv) {
      const bf16* e = reinterpret_cast<const bf16*>(&xv[j]);
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const float f = load(e + q);
        ss += f * f;
      }
    }
  }
  if (loaded) *loaded = sm_clock_after(__float_as_uint(ss));
  const float inv = 1.0f / sqrtf(consumers_sum(ss, red) / static_cast<float>(n) + eps);
#pragma unroll
  for (int j = 0; j < kMaxVec; ++j) {
    const int v = tid + j * kConsumers;
    if (v < nv) {
      const bf16* xe = reinterpret_cast<const bf16*>(&xv[j]);
      const bf16* we = reinterpret_cast<const bf16*>(&wv[j]);
      uint4 o;
      bf16* oe = reinterpret_cast<bf16*>(&o);
#pragma unroll
      for (int q = 0; q < 8; ++q) store(oe + q, bf16_round(load(we + q) * bf16_round(load(xe + q) * inv)));
      store_x_vector(xs, v, o);
    }
  }
}

template <bool F>
__device__ void stage_plain(const bf16* x, const uint32_t* xf, uint32_t tag, int k, int n, bf16* xs,
                            unsigned long long* loaded) {
  uint4 xv[kMaxVec];
  load_input<F>(x, xf, tag, k, n / 8, xv);  // every load in flight before the first store
#pragma unroll
  for (int j = 0; j < kMaxVec; ++j) {
    const int v = threadIdx.x + j * kConsumers;
    if (v < n / 8) store_x_vector(xs, v, xv[j]);
  }
  if (loaded) *loaded = sm_clock_after(xv[0].x);
}

// ---- the consumers: GEMV tiles -------------------------------------------------
struct GemvState {
  int i = 0;                        // the block's running tile count (ring position)
  unsigned long long best = 0;      // lm_head: this thread's largest argmax key
  bool timing = false;              // kTrace: block 0's thread 0 times its stage waits
  unsigned long long stall = 0;
  int aux_i = 0;                    // the block's running aux-slot count
};

// Waits for a ring stage to land (timed for the trace).
template <bool kTrace>
__device__ __forceinline__ void wait_stage(uint64_t* full, int s, uint32_t parity, GemvState& st) {
  // (unbounded: a hot loop; a stage that never lands leaves the producer or
  // another block's grid-wide wait to trap)
  if (!kTrace || !st.timing) return mbarrier_wait(&full[s], parity);
  const unsigned long long t0 = sm_clock();
  mbarrier_wait(&full[s], parity);
  st.stall += sm_clock() - t0;
}

// Ring use i taken and given back unread (the no-attention ablation).
template <bool kTrace>
__device__ __forceinline__ void pass_stage(uint64_t* full, uint64_t* empty, int i, GemvState& st) {
  wait_stage<kTrace>(full, i % kStages, (i / kStages) & 1, st);
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbarrier_arrive(&empty[i % kStages]);
}

// A tile on the tensor cores: D = A B + D (mma m16n8k16, bf16 in, fp32
// sums) with B = 8 weight rows x 16 inputs (ldmatrix from the stage's
// padded rows: the fragment mma's "col" B layout wants is row-major W) and
// x in A's rows (see tile_part_mma: rows 0-7 for one 16-input step, 8-15
// for the next). Row 0 of D, the 8 dot products, ends in lanes 0-3: lane l
// holds rows 2l and 2l + 1 (d[0], d[1] for row 0; d[2], d[3] for row 8).
// A scalar warp-per-row dot product spends ~25 instructions on every 512
// bytes of weights; this spends ~5 (an ldmatrix, two mma, one x load):
// the step was bound by instruction issue (8 consumer warps an SM, ~2 M
// warp instructions an SM a step; docs/PERFORMANCE.md).
// (ldmatrix_x4 and mma16816: gpu/prefill_mma.h, the prefill kernels' own)

// Where one lane's operands of an op's tiles lie, the same for every tile
// of the op: worked out once per op (gemv_tiles), since a block's tiles are
// short and many (~600 a step), and integer work per tile sits on each
// tile's critical path.
struct TileLanes {
  uint32_t b_offset;  // this lane's ldmatrix row address, from the stage's start
  int x_frag;         // this lane's first A operand (16-byte units of the staged x)
  int nsb;            // super-blocks of a row
  int nseg;           // segments: 8 / rows (2 <= rows < 8, dividing the blocks evenly), else 1
};
__device__ __forceinline__ TileLanes tile_lanes(int in, int rows, int lane, bool segments) {
  const int n32 = in / 32, lr = __ffs(rows) - 1;  // rows: 8, 4, 2 or 1
  const int nseg = segments && rows >= 2 && rows < 8 && (n32 & ((8 >> lr) - 1)) == 0 ? 8 >> lr : 1;
  const int c = lane & 7;
  const int r = nseg > 1 ? c & (rows - 1) : min(c, rows - 1), s = nseg > 1 ? c >> lr : 0;
  TileLanes t;
  // matrix lane / 8: inputs + 8 (lane / 8) of the row's block
  t.b_offset = static_cast<uint32_t>(r * (in * 2 + kRowPad) + s * 64 + (lane >> 3) * 16);
  t.x_frag = (lane & 3) + ((lane >> 2) & (nseg - 1)) * 4;
  t.nsb = n32 / nseg;
  t.nseg = nseg;
  return t;
}

// This warp's share of a tile: the 32-input blocks of rows 0 .. rows - 1
// it takes (super-blocks jj = warp, warp + warps, ...). The sums of rows 2l,
// 2l + 1 end in lanes l < rows / 2 (rows 0, 1 in lane 0 when rows == 1);
// the warps' shares meet in shared memory.
//
// mma's B has 8 columns. A tile of R = 8 rows fills them; a tile of fewer
// rows (long inputs: o, down) leaves 8 - R of them computing copies. With
// Params::tile_segments, B's column c is row c % R over the segment s = c / R of its
// inputs, and A's row s (and s + 8: lane group l / 4 loads A's rows l / 4
// and l / 4 + 8) holds x's segment s: the sums wanted are D's entries
// (s, c) with c / R == s, one segment of one row each, added up across the
// lanes at the end. A segment is every nseg-th 32-input block (nseg = 8 / R;
// super-block jj holds blocks nseg jj .. nseg jj + nseg - 1), not a
// contiguous run: 16-byte row slots 64 bytes apart then fall on distinct
// banks for R = 4 (two-way for R = 2; contiguous runs of a 1536-byte
// multiple would be four-way). A tile's mma count, and its chain of
// dependent mma, drops by nseg.
__device__ __forceinline__ float2 tile_part_mma(const unsigned char* stage, const bf16* x, const TileLanes& tl,
                                                int rows, int warp, int warps) {
  const uint32_t row = smem_address(stage) + tl.b_offset;
  // x in A: the staged layout's vector {a0 of step 0, a0 of step 1, a2 of
  // step 0, a2 of step 1} (x_frag_index) is a whole A operand for both
  // 16-input steps of a block: with step 0's B, A's rows 0-7 give x . B
  // (rows 8-15 whatever); with step 1's B, rows 8-15 do (as a1 and a3). So
  // step 0 sums in d[0], d[1] of its accumulator, step 1 in d[2], d[3] of
  // another. Lane group l / 4 takes the segment (l / 4) % nseg.
  using Frag = uint32_t[4];
  const Frag* xv = reinterpret_cast<const Frag*>(x) + tl.x_frag;
  // a super-block: nseg 32-input blocks, 64 bytes (4 A operands) each
  const int sb_bytes = tl.nseg * 64, sb_frags = tl.nseg * 4, nsb = tl.nsb;
  // four accumulators, two super-blocks in flight: the chain of dependent
  // mma (their latency, ~30 cycles each) is a quarter of the warp's steps
  float d[4][4] = {};
  int j = warp;
  for (; j + warps < nsb; j += 2 * warps) {
    uint32_t b[4], e[4];
    ldmatrix_x4(b, row + j * sb_bytes);
    ldmatrix_x4(e, row + (j + warps) * sb_bytes);
    const Frag &xa = xv[j * sb_frags], &xb = xv[(j + warps) * sb_frags];
    mma16816<bf16>(d[0], xa, b[0], b[1]);
    mma16816<bf16>(d[1], xa, b[2], b[3]);
    mma16816<bf16>(d[2], xb, e[0], e[1]);
    mma16816<bf16>(d[3], xb, e[2], e[3]);
  }
  if (j < nsb) {
    uint32_t b[4];
    ldmatrix_x4(b, row + j * sb_bytes);
    const Frag& xa = xv[j * sb_frags];
    mma16816<bf16>(d[0], xa, b[0], b[1]);
    mma16816<bf16>(d[1], xa, b[2], b[3]);
  }
  const float2 v = make_float2((d[0][0] + d[1][2]) + (d[2][0] + d[3][2]), (d[0][1] + d[1][3]) + (d[2][1] + d[3][3]));
  if (tl.nseg == 1) return v;
  // rows 2p, 2p + 1 of segment s sit in lane 4s + (s rows + 2p) / 2:
  // lanes p < rows / 2 gather the other segments' from lane p + s (4 + rows / 2)
  float2 sum = v;
  const int stride = 4 + rows / 2;
  for (int q = 1; q < tl.nseg; ++q) {
    sum.x += __shfl_down_sync(0xffffffffu, v.x, q * stride);
    sum.y += __shfl_down_sync(0xffffffffu, v.y, q * stride);
  }
  return sum;
}

// The o and down epilogues add into the residual stream. The old values a
// thread adds to come into registers when the op's tiles start, kAhead tiles
// ahead, and move up one slot per tile: read in the epilogue, each would
// cost the tile an L2 round trip. The thread owning row r of a tile:
// thread r of the tile's group (the one that sums the warps' parts of row
// r); the slots hold the group's next tiles.
// F (the flagged exchange): the slots hold the words as loaded, their tags
// checked only when used, so the load's round trip still overlaps the tiles
// in between.
constexpr int kAhead = 2;
template <bool F>
struct ResidualAhead {
  float v[kAhead];
};
template <>
struct ResidualAhead<true> {
  uint32_t v[kAhead];
};
__device__ __forceinline__ bool residual_row(const Gemv& g, int t, int r) {
  return r >= 0 && t < g.tiles && t * g.rows + r < g.out;
}
// Row r of tile t's old residual value as a slot holds it.
template <bool F>
__device__ __forceinline__ auto residual_load(const Params& p, int kind, int layer, const bf16* embed_row,
                                              const Gemv& g, int t, int r) {
  using Slot = std::remove_reference_t<decltype(ResidualAhead<F>{}.v[0])>;
  if (!residual_row(g, t, r)) return Slot{};
  const int row = t * g.rows + r;
  if constexpr (F) {
    // layer 0's o adds to the embedding: its bits with tag 0 (taken as they are)
    if (kind == kOpO && layer == 0) return static_cast<uint32_t>(__bfloat16_as_ushort(embed_row[row]));
    return load_relaxed1(p.hidden_f + row);
  } else {
    if (kind == kOpO && layer == 0) return __bfloat162float(embed_row[row]);
    return __bfloat162float(__ldcg(p.hidden + row));  // written by another SM earlier in the step
  }
}
// The value of a slot, when it is used (F: its tag checked, polled again if
// the word was not yet written when it was loaded).
template <bool F, typename Slot>
__device__ __forceinline__ float residual_value(const Params& p, const Gemv& g, int t, int r, Slot slot,
                                                const Tags& tags) {
  if constexpr (F) {
    if (!residual_row(g, t, r)) return 0.0f;
    if (tags.residual != 0 && (slot >> 16) != tags.residual)
      return poll_word(p.hidden_f + t * g.rows + r, tags.residual, tags.k);
    return flagged_value(slot);
  } else {
    (void)p, (void)g, (void)t, (void)r, (void)tags;
    return slot;
  }
}

// One output value of a non-pair GEMV: row `row`, sum `acc`; `old`: the
// residual row's value before (o, down).
template <bool F>
__device__ __forceinline__ void gemv_output(const Params& p, int kind, int row, float acc, float old, GemvState& st,
                                            const Tags& tags) {
  const bool keep = !(p.ablate & kAblateNoStores);
  switch (kind) {
    case kOpQkv:
      if (!keep) break;
      if constexpr (F) store_flagged(p.qkv_f + row, acc, tags.out);
      else store(p.qkv + row, acc);
      break;
    case kOpO:
    case kOpDown:
      if (!keep) break;
      if constexpr (F) store_flagged(p.hidden_f + row, bf16_round(bf16_round(acc) + old), tags.out);
      else store(p.hidden + row, bf16_round(bf16_round(acc) + old));
      break;
    default: {  // lm_head
      const float v = bf16_round(acc);
      if (keep) store(p.logits + row, v);
      st.best = max_u64(st.best, argmax_key(v, row));
      break;
    }
  }
}

template <bool kTrace, bool F>
__device__ void gemv_tiles(const Params& p, int k, const Gemv& g, const bf16* xs, const unsigned char* ring,
                           uint64_t* full, uint64_t* empty, float* rows_smem, const bf16* embed_row, GemvState& st,
                           const Tags& tags) {
  const int G = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kind = op_kind(k, p.n_layers), layer = k / kOpsPerLayer;
  const int R = g.rows, half = R / 2;
  // tile groups: the tile in ring position i goes to group i % groups, whose
  // warps split its inputs (stage i % kStages always meets the same group)
  const int lg = p.tile_groups_log2, groups = 1 << lg, wpg = kConsumerWarps >> lg;
  const int grp = warp >> (3 - lg), gw = warp & (wpg - 1), gtid = static_cast<int>(threadIdx.x) & (32 * wpg - 1);
  // (kAblateNoStores: no residual loads either, nothing adds to them)
  const bool adds = (kind == kOpO || kind == kOpDown) && !(p.ablate & kAblateNoStores);
  const int owner = adds && gtid < R ? gtid : -1;
  // the group's tiles: t0, t0 + groups G, ...
  const int t0 = b + ((grp - st.i) & (groups - 1)) * G, step = groups * G;
  const TileLanes tl = tile_lanes(g.in, R, lane, p.tile_segments);
  ResidualAhead<F> ra;
#pragma unroll
  for (int q = 0; q < kAhead; ++q) ra.v[q] = residual_load<F>(p, kind, layer, embed_row, g, t0 + q * step, owner);
  for (int t = b; t < g.tiles; t += G, ++st.i) {
    if ((st.i & (groups - 1)) != grp) continue;
    const auto slot = ra.v[0];
    if (adds) {
#pragma unroll
      for (int q = 0; q + 1 < kAhead; ++q) ra.v[q] = ra.v[q + 1];
      ra.v[kAhead - 1] = residual_load<F>(p, kind, layer, embed_row, g, t + kAhead * step, owner);
    }
    const int s = st.i % kStages;
    // rows of this tile that exist (the last tile may be short)
    const int valid = g.pairs ? min(half, g.out - t * half) : min(R, g.out - t * R);
    wait_stage<kTrace>(full, s, (st.i / kStages) & 1, st);
    float2 acc = make_float2(0.0f, 0.0f);
    if (!(p.ablate & kAblateNoTileMath)) acc = tile_part_mma(ring + s * kStageBytes, xs, tl, R, gw, wpg);
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[s], static_cast<uint32_t>(groups));  // the group's wpg warps count 8
    // two buffers a group: one barrier per tile
    float* rs = rows_smem + (grp * 2 + ((st.i >> lg) & 1)) * 64;
    if (lane < 4) {
      rs[(2 * lane) * 8 + gw] = acc.x;
      rs[(2 * lane + 1) * 8 + gw] = acc.y;
    }
    if (groups == 1) consumers_sync();
    else if (wpg == 1) __syncwarp();
    else asm volatile("bar.sync %0, %1;" ::"r"(2 + grp), "r"(32 * wpg) : "memory");
    if (g.pairs) {
      if (gtid < valid) {
        float gs = 0.0f, us = 0.0f;
        for (int q = 0; q < wpg; ++q) {
          gs += rs[gtid * 8 + q];
          us += rs[(gtid + half) * 8 + q];
        }
        const float gv = bf16_round(gs), uv = bf16_round(us);
        const float silu = gv / (1.0f + expf(-gv));
        const float out = bf16_round(bf16_round(silu) * uv);
        if (p.ablate & kAblateNoStores) {
        } else if constexpr (F) {
          store_flagged(p.act_f + t * half + gtid, out, tags.out);
        } else {
          store(p.act + t * half + gtid, out);
        }
      }
    } else if (gtid < valid) {
      float sum = 0.0f;
      for (int q = 0; q < wpg; ++q) sum += rs[gtid * 8 + q];
      gemv_output<F>(p, kind, t * R + gtid, sum, residual_value<F>(p, g, t, owner, slot, tags), st, tags);
    }
  }
}

// ---- the consumers: attention ------------------------------------------------
// merge_in_attention: after storing its split partial, a block counts itself
// on its kv head's counter (its stores fenced first); the block that counts
// last merges the kv head's splits, out = sum_q acc_q e^(m_q - M) / sum_q
// l_q e^(m_q - M) (one pass, rescaled as the running max M grows), rounded
// to bf16 into attn_out; the counter wraps back to zero.
template <bool F>
__device__ void merge_if_last(const Params& p, int g, int nsplit, int group, int D, unsigned char* smem,
                              const Tags& tags) {
  int* s_last = reinterpret_cast<int*>(smem + SmemLayout::kRed);
  const int tid = threadIdx.x;
  if (tid == 0) {
    __threadfence();  // this block's partial, before its count
    // atomicInc wraps to 0 on the nsplit-th count: the counter is left zero
    // for the next layer and step without a store that could erase a count
    // (ablations without grid-wide waits let layers overlap)
    const unsigned last_count = static_cast<unsigned>(nsplit - 1);
    const bool last = atomicInc(p.merge_count + g, last_count) == last_count;
    if (last) __threadfence();  // the other splits' partials, after their counts
    *s_last = last ? 1 : 0;
  }
  consumers_sync();
  const bool last = *s_last != 0;
  consumers_sync();  // s_last is rewritten by the next item
  if (!last) return;
  const int64_t split_stride = static_cast<int64_t>(group) * (D + 2);
  const float* head0 = p.partial + static_cast<int64_t>(g) * p.max_splits * split_stride;
  for (int idx = tid; idx < group * D; idx += kConsumers) {
    const int gg = idx / D, d = idx % D;
    const float* base = head0 + gg * (D + 2);
    float m = -INFINITY, l = 0.0f, a = 0.0f;
#pragma unroll 4
    for (int q = 0; q < nsplit; ++q) {
      const float* pq = base + q * split_stride;
      const float mq = __ldcg(pq), lq = __ldcg(pq + 1), aq = __ldcg(pq + 2 + d);
      const float m_new = fmaxf(m, mq), c_old = expf(m - m_new), c_q = expf(mq - m_new);
      l = l * c_old + lq * c_q;
      a = a * c_old + aq * c_q;
      m = m_new;
    }
    const int64_t at = static_cast<int64_t>(g * group + gg) * D + d;
    if constexpr (F) store_flagged(p.attn_f + at, a / l, tags.out);
    else store(p.attn_out + at, a / l);
  }
}

// Query heads h0 .. h0 + group - 1 (of kv head g), its key and its value for
// this token, as the qkv GEMV stored them, into s_heads ([group + 2][D]
// bf16): F, polled from the flagged words until the qkv op's tag; else read
// through L2.
template <int kPer, bool F>  // head dims per lane: D = 32 kPer
__device__ __forceinline__ void load_kv_head_group(const Params& p, int g, int h0, int group, bf16* s_heads,
                                                   const Tags& tags) {
  const int heads = p.heads, kvh = p.kv_heads, D = 32 * kPer;
  for (int v = threadIdx.x; v < (group + 2) * D / 8; v += kConsumers) {
    const int hh = v * 8 / D, d = v * 8 % D;
    const int src_head = hh < group ? h0 + hh : hh == group ? heads + g : heads + kvh + g;
    const int64_t at = static_cast<int64_t>(src_head) * D + d;
    if constexpr (F) {
      const uint32_t* words = p.qkv_f + at;
      reinterpret_cast<uint4*>(s_heads)[v] =
          poll_flagged8(words, load_relaxed4(words), load_relaxed4(words + 4), tags.in, tags.k);
    } else {
      reinterpret_cast<uint4*>(s_heads)[v] = __ldcg(reinterpret_cast<const uint4*>(p.qkv + at));
    }
  }
}

// One item: scores of this kv head's query heads against the page's keys
// (K page in one ring stage, V page in the next), softmax over the page,
// p . v, written as a split partial (max, sum, acc[D]) per query head; the o
// projection's staging merges the splits (stage_attention).
template <int kPer, bool kTrace, bool F>  // head dims per lane: D = 32 kPer
__device__ void attention_op(const Params& p, int layer, int len, unsigned char* smem, const unsigned char* ring,
                             uint64_t* full, uint64_t* empty, const bf16* q_norm, const bf16* k_norm, GemvState& st,
                             const Tags& tags) {
  const int G = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int D = 32 * kPer, heads = p.heads, kvh = p.kv_heads, group = heads / kvh;
  const Layer& L = p.layers[layer];
  bf16* s_heads = reinterpret_cast<bf16*>(smem + SmemLayout::kHeads);
  float* s_q = reinterpret_cast<float*>(smem + SmemLayout::kQ);
  float* s_kv = reinterpret_cast<float*>(smem + SmemLayout::kKV);
  float* s_p = reinterpret_cast<float*>(smem + SmemLayout::kP);
  float* s_m = reinterpret_cast<float*>(smem + SmemLayout::kML);
  float* s_l = s_m + kMaxGroup;
  float* s_acc = reinterpret_cast<float*>(smem + SmemLayout::kAcc);

  const int pos = len - 1;
  const int nsplit = attention_splits(p, len);
  if (p.ablate & kAblateNoAttention) {  // time only: each item's K and V stages, taken and given back
    for (int item = b; item < nsplit * kvh; item += G)
      for (int kv = 0; kv < 2; ++kv, ++st.i) pass_stage<kTrace>(full, empty, st.i, st);
    return;
  }
  const RopeCoefs rc = rope_coefs_regs<kPer>(p.rope, static_cast<float>(pos), lane);
  for (int item = b; item < nsplit * kvh; item += G) {
    const int split = item / kvh, g = item % kvh;
    const int key0 = split * kPageKeys, nk = min(kPageKeys, len - key0);
    const bool has_new = pos - key0 < kPageKeys;  // this page holds the new key
    load_kv_head_group<kPer, F>(p, g, g * group, group, s_heads, tags);
    consumers_sync();
    for (int task = warp; task < group + (has_new ? 1 : 0); task += kConsumerWarps) {
      const bf16* src = s_heads + task * D;
      const bf16* w = task < group ? q_norm : k_norm;
      float* dst = task < group ? s_q + task * kMaxD : s_kv;
      norm_rope_head_regs<kPer>(src, w, p.rope, rc, lane, [&](int i, float v) { dst[i] = stored_as<bf16>(v); });
    }
    if (has_new)
      for (int d = tid; d < D; d += kConsumers) s_kv[kMaxD + d] = load(s_heads + (group + 1) * D + d);
    consumers_sync();
    if (has_new) {  // the cache write: exactly one item per kv head holds pos
      const int64_t at = kv_page_offset(p, split, g) + static_cast<int64_t>(pos - key0) * D;
      for (int d = tid; d < D; d += kConsumers) {
        store(L.k_pool + at + d, s_kv[d]);
        store(L.v_pool + at + d, s_kv[kMaxD + d]);
      }
    }
    // The warp's rows of a K or V page (keys w, w + 8, ...; the lane's dims
    // [lane kPer, +kPer)): key pos from `fresh` (this step's, in shared
    // memory), rows past the sequence 0.
    auto load_rows = [&](const bf16* page, const float* fresh, float (&rows)[kKeysPerWarp][kPer]) {
#pragma unroll
      for (int i = 0; i < kKeysPerWarp; ++i) {
        const int j = warp + i * kConsumerWarps;
        if (j < nk && key0 + j == pos) {
#pragma unroll
          for (int e = 0; e < kPer; ++e) rows[i][e] = fresh[lane * kPer + e];
        } else if (j < nk) {
          load_vec<bf16, kPer>(page + j * D + lane * kPer, rows[i]);
        } else {
#pragma unroll
          for (int e = 0; e < kPer; ++e) rows[i][e] = 0.0f;
        }
      }
    };
    const int sk = st.i % kStages, pk = (st.i / kStages) & 1;
    ++st.i;
    const int sv = st.i % kStages, pv = (st.i / kStages) & 1;
    ++st.i;
    // scores: warp w takes keys w, w + 8, ...; lane holds dims [lane kPer, +kPer).
    // The page's slot pos (if here) is stale in the copy: the new key comes
    // from s_kv; slots past the sequence are never read.
    wait_stage<kTrace>(full, sk, pk, st);
    const bf16* kpage = reinterpret_cast<const bf16*>(ring + sk * kStageBytes);
    float kr[kKeysPerWarp][kPer];
    load_rows(kpage, s_kv, kr);
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[sk]);
    for (int gg = 0; gg < group; ++gg) {
      float q[kPer];
#pragma unroll
      for (int e = 0; e < kPer; ++e) q[e] = s_q[gg * kMaxD + lane * kPer + e];
#pragma unroll
      for (int i = 0; i < kKeysPerWarp; ++i) {
        float sc = 0.0f;
#pragma unroll
        for (int e = 0; e < kPer; ++e) sc = fmaf(q[e], kr[i][e], sc);
        sc = warp_sum(sc);
        const int j = warp + i * kConsumerWarps;
        if (lane == 0) s_p[gg * kPageKeys + j] = j < nk ? sc * p.scale : -INFINITY;
      }
    }
    consumers_sync();
    if (warp < group) {  // softmax over the page, one warp per head
      const float a = s_p[warp * kPageKeys + lane], c = s_p[warp * kPageKeys + lane + 32];
      const float m = warp_max(fmaxf(a, c));  // finite: key0 is visible
      const float ea = expf(a - m), ec = expf(c - m);
      const float l = warp_sum(ea + ec);
      s_p[warp * kPageKeys + lane] = bf16_round(ea);
      s_p[warp * kPageKeys + lane + 32] = bf16_round(ec);
      if (lane == 0) {
        s_m[warp] = m;
        s_l[warp] = l;
      }
    }
    consumers_sync();
    // p . v over the same keys per warp, then the warps' sums meet in shared memory
    wait_stage<kTrace>(full, sv, pv, st);
    const bf16* vpage = reinterpret_cast<const bf16*>(ring + sv * kStageBytes);
    float vr[kKeysPerWarp][kPer];
    load_rows(vpage, s_kv + kMaxD, vr);  // rows past nk are 0, as their p is
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[sv]);
    for (int gg = 0; gg < group; ++gg) {
      float acc[kPer];
#pragma unroll
      for (int e = 0; e < kPer; ++e) acc[e] = 0.0f;
#pragma unroll
      for (int i = 0; i < kKeysPerWarp; ++i) {
        const float pj = s_p[gg * kPageKeys + warp + i * kConsumerWarps];
#pragma unroll
        for (int e = 0; e < kPer; ++e) acc[e] = fmaf(pj, vr[i][e], acc[e]);
      }
#pragma unroll
      for (int e = 0; e < kPer; ++e) s_acc[(warp * kMaxGroup + gg) * kMaxD + lane * kPer + e] = acc[e];
    }
    consumers_sync();
    float* part = p.partial + (static_cast<int64_t>(g) * p.max_splits + split) * group * (D + 2);
    for (int idx = tid; idx < group * D; idx += kConsumers) {
      const int gg = idx / D, d = idx % D;
      float a = 0.0f;
#pragma unroll
      for (int w = 0; w < kConsumerWarps; ++w) a += s_acc[(w * kMaxGroup + gg) * kMaxD + d];
      float* pp = part + gg * (D + 2);
      if (d == 0) {
        pp[0] = s_m[gg];
        pp[1] = s_l[gg];
      }
      pp[2 + d] = a;
    }
    consumers_sync();  // shared memory is reused by the next item
    if (F || p.merge_in_attention) merge_if_last<F>(p, g, nsplit, group, D, smem, tags);
  }
}

// Whole-head attention (whole_heads): block whole_head_of(b) takes kv head
// g's query heads against all its keys, the n <= stages / 2 pages of K and
// then of V in consecutive ring stages. Warp w owns keys 32 w + [0, 32)
// (page w / 2). Its scores per query head: each lane holds an eighth of q's
// dims in registers and sums them against 8 of the warp's keys, and a
// transposed butterfly over the 8 lanes sharing a key group leaves each lane
// one key's whole score. (One key a lane, with q re-read from shared memory
// per key, moved three times the shared-memory bytes: H100 0.770 -> 0.752 ms
// a step; docs/PERFORMANCE.md.) Then the warp's own softmax: m_w = max s,
// p = e^(s - m_w) rounded to bf16, l_w = sum p, and acc_w = sum p v with
// the lane holding kPer dims. The warps meet once in shared memory: out =
// sum_w acc_w e^(m_w - M) / sum_w l_w e^(m_w - M), M = max_w m_w (the
// per-kernel wide decode kernel's math, gpu/paged_decode.h, with 32 keys
// a warp instead of 16). Key pos is this step's: the ring's copies of its
// K and V pages predate its cache write, so the warp holding it writes the
// new key and value into those rows of the ring first (its own rows: no
// other warp reads them), and every key is then read alike.
template <int kPer, bool kTrace, bool F>
__device__ void attention_whole(const Params& p, int layer, int len, unsigned char* smem, unsigned char* ring,
                                uint64_t* full, uint64_t* empty, const bf16* q_norm, const bf16* k_norm,
                                GemvState& st, const Tags& tags) {
  constexpr int kChunks = 32 * kPer / 8;  // 16-byte chunks of a key row
  static_assert(kChunks == 8 || kChunks == 16, "the scores' lanes take one or two chunks of a key row (D 64 or 128)");
  const int w_part = whole_head_of(p, static_cast<int>(blockIdx.x));
  if (w_part < 0) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int D = 32 * kPer, heads = p.heads, kvh = p.kv_heads;
  const int g = w_part / p.head_parts, part = w_part % p.head_parts;
  // kTrace: the first attention block's events (g_trace_attn)
  unsigned long long* ev = kTrace && w_part == 0 ? &g_trace_attn[layer * kAttnEvents] : nullptr;
  auto mark = [&](int e) {
    if (ev) ev[e] = sm_clock();
  };
  if (tid == 0) mark(kAttnStart);
  // this block's query heads: h0 .. h0 + group - 1 of the kv head's (all of
  // them when head_parts is 1)
  const int group = heads / kvh / p.head_parts, h0 = g * (heads / kvh) + part * group;
  const Layer& L = p.layers[layer];
  bf16* s_heads = reinterpret_cast<bf16*>(smem + SmemLayout::kHeads);
  float* s_q = reinterpret_cast<float*>(smem + SmemLayout::kQ);
  float* s_kv = reinterpret_cast<float*>(smem + SmemLayout::kKV);
  float* s_p = reinterpret_cast<float*>(smem + SmemLayout::kP) + warp * kMaxGroup * 32;  // this warp's [gg][32]
  float* s_wm = reinterpret_cast<float*>(smem + SmemLayout::kML);                        // [warp][gg]
  float* s_wl = s_wm + kConsumerWarps * kMaxGroup;
  float* s_acc = reinterpret_cast<float*>(smem + SmemLayout::kAcc);
  const int pos = len - 1, npages = (len + kPageKeys - 1) / kPageKeys;
  const int i0 = st.i;  // K page q in ring use i0 + q, V page q in i0 + npages + q
  st.i += 2 * npages;
  if (p.ablate & kAblateNoAttention) {  // time only: the stages taken and given back
    for (int q = 0; q < 2 * npages; ++q) pass_stage<kTrace>(full, empty, i0 + q, st);
    return;
  }

  // RoPE's coefficients first: their inv_freq loads and sin/cos overlap the
  // wait for this step's q|k|v instead of following it; with rope_once,
  // layer 0's are kept in shared memory for the later layers (the same
  // position; many block barriers lie between the write and the reads)
  float* s_rope = reinterpret_cast<float*>(smem + SmemLayout::kRope);  // [c0, c1, s0, s1][32]
  RopeCoefs rc;
  if (p.rope_once && layer > 0) {
    rc.c[0] = s_rope[lane];
    rc.c[1] = s_rope[32 + lane];
    rc.s[0] = s_rope[64 + lane];
    rc.s[1] = s_rope[96 + lane];
  } else {
    rc = rope_coefs_regs<kPer>(p.rope, static_cast<float>(pos), lane);
    if (p.rope_once && warp == 0) {
      s_rope[lane] = rc.c[0];
      s_rope[32 + lane] = rc.c[1];
      s_rope[64 + lane] = rc.s[0];
      s_rope[96 + lane] = rc.s[1];
    }
  }
  load_kv_head_group<kPer, F>(p, g, h0, group, s_heads, tags);
  consumers_sync();
  if (tid == 0) mark(kAttnQkvIn);
  for (int task = warp; task < group + 1; task += kConsumerWarps) {
    const bf16* src = s_heads + task * D;
    const bf16* w = task < group ? q_norm : k_norm;
    float* dst = task < group ? s_q + task * kMaxD : s_kv;
    norm_rope_head_regs<kPer>(src, w, p.rope, rc, lane, [&](int i, float v) { dst[i] = stored_as<bf16>(v); });
  }
  if (tid == 0) mark(kAttnNormed);
  for (int d = tid; d < D; d += kConsumers) s_kv[kMaxD + d] = load(s_heads + (group + 1) * D + d);
  consumers_sync();
  if (tid == 0) mark(kAttnRoped);
  if (part == 0) {  // the cache write of key pos (one block per kv head)
    const int64_t at = kv_page_offset(p, pos / kPageKeys, g) + static_cast<int64_t>(pos % kPageKeys) * D;
    for (int d = tid; d < D; d += kConsumers) {
      store(L.k_pool + at + d, s_kv[d]);
      store(L.v_pool + at + d, s_kv[kMaxD + d]);
    }
  }

  const int page = warp / 2, wkey0 = warp * 32;
  const bool live = page < npages;
  const int nvis = live ? min(32, len - wkey0) : 0;  // the warp's visible keys: a prefix
  const bool has_pos = live && pos >= wkey0 && pos < wkey0 + 32;  // the warp holding key pos (its last visible key)
  // key pos's row of a page that landed in stage s: this step's key (kv 0)
  // or value (1), bf16-exact in s_kv; the proxy fence orders these writes
  // before the copy engine refills the stage (after the empty arrival)
  auto put_pos_row = [&](int s, int kv) {
    bf16* row = reinterpret_cast<bf16*>(ring + s * kStageBytes) + (pos % kPageKeys) * D;
    for (int d = lane; d < D; d += 32) store(row + d, s_kv[kv * kMaxD + d]);
    fence_proxy_async_shared();
    __syncwarp();
  };
  // One query head at a time (few registers: this code is inlined into the
  // whole kernel, whose GEMV path must not spill); K and V rows are re-read
  // from shared memory per head.
  if (live) {
    const int s = (i0 + page) % kStages;
    wait_stage<kTrace>(full, s, ((i0 + page) / kStages) & 1, st);
    if (tid == 0) mark(kAttnKLanded);
    if (has_pos) put_pos_row(s, 0);
    // Scores: lane (kg, sub) = (lane / 8, lane % 8) holds q's dims of sub
    // (D / 8 of them) in registers and sums them against the warp's keys
    // kg + 4 j, j < 8; a transposed butterfly over the 8 sub lanes then
    // leaves it the whole score of key kg + 4 sub.
    constexpr int kLaneChunks = kChunks / 8;  // a lane's 16-byte chunks of a key row: 2 (D 128) or 1 (D 64)
    constexpr int kLaneDims = 8 * kLaneChunks;
    const int sub = lane % 8, kg = lane / 8;
    // the order a lane takes its two chunks in: the 8 lanes of a quarter-warp
    // (one key row) then read 8 distinct 16-byte bank groups
    const int swz = kLaneChunks == 2 ? (sub >> 2) & 1 : 0;
    const uint4* kpage = reinterpret_cast<const uint4*>(ring + s * kStageBytes) + (wkey0 % kPageKeys) * kChunks;
    for (int gg = 0; gg < group; ++gg) {
      const float* q = s_q + gg * kMaxD;
      float qs[kLaneDims];  // q's dims of sub, in the lane's chunk order
#pragma unroll
      for (int i = 0; i < kLaneChunks; ++i) {
        const float4* qc = reinterpret_cast<const float4*>(q + (sub * kLaneChunks + (i ^ swz)) * 8);
        const float4 a = qc[0], b = qc[1];
        qs[8 * i + 0] = a.x, qs[8 * i + 1] = a.y, qs[8 * i + 2] = a.z, qs[8 * i + 3] = a.w;
        qs[8 * i + 4] = b.x, qs[8 * i + 5] = b.y, qs[8 * i + 6] = b.z, qs[8 * i + 7] = b.w;
      }
      // partial scores of keys kg + 4 j over the lane's dims (rows past the
      // sequence hold stale bits: their sums stay with their own keys, and
      // are masked below); eight independent chains
      float part_sc[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const uint4* krow = kpage + (kg + 4 * j) * kChunks + sub * kLaneChunks;
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < kLaneChunks; ++i) {
          const uint4 kv4 = krow[i ^ swz];
          const __nv_bfloat162* k2 = reinterpret_cast<const __nv_bfloat162*>(&kv4);
#pragma unroll
          for (int h = 0; h < 4; ++h) {
            const float2 kf = __bfloat1622float2(k2[h]);
            acc = fmaf(qs[8 * i + 2 * h], kf.x, acc);
            acc = fmaf(qs[8 * i + 2 * h + 1], kf.y, acc);
          }
        }
        part_sc[j] = acc;
      }
      // the butterfly: in the xor-m round (m = 4, 2, 1) a lane keeps the half
      // of its sums whose key bit matches its own bit m of sub, gives the
      // other half to its partner and adds the partner's half of its own
      const bool b2 = sub & 4, b1 = sub & 2, b0 = sub & 1;
      float half4[4], half2[2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        half4[i] = (b2 ? part_sc[i + 4] : part_sc[i]) +
                   __shfl_xor_sync(0xffffffffu, b2 ? part_sc[i] : part_sc[i + 4], 4);
#pragma unroll
      for (int i = 0; i < 2; ++i)
        half2[i] = (b1 ? half4[i + 2] : half4[i]) + __shfl_xor_sync(0xffffffffu, b1 ? half4[i] : half4[i + 2], 2);
      const float score = (b0 ? half2[1] : half2[0]) + __shfl_xor_sync(0xffffffffu, b0 ? half2[0] : half2[1], 1);
      const int t = kg + 4 * sub;  // the lane's key: wkey0 + t
      const bool visible = t < nvis;
      const float sv = visible ? score * p.scale : -INFINITY;
      // -inf when none of the warp's keys is visible (the second warp of the
      // last page): then e and l are 0 and the merge skips the warp
      const float mx = warp_max(sv);
      const float e = visible ? expf(sv - mx) : 0.0f;
      const float l = warp_sum(e);
      s_p[gg * 32 + t] = bf16_round(e);
      if (lane == 0) {
        s_wm[warp * kMaxGroup + gg] = mx;
        s_wl[warp * kMaxGroup + gg] = l;
      }
    }
  } else if (lane == 0) {
    for (int gg = 0; gg < group; ++gg) {
      s_wm[warp * kMaxGroup + gg] = -INFINITY;
      s_wl[warp * kMaxGroup + gg] = 0.0f;
    }
  }
  __syncwarp();
  if (tid == 0) mark(kAttnScored);
  if (has_pos && lane == 0) mark(kAttnPosScored);
  if (lane == 0)  // every warp gives back every K stage (the ring counts 8 arrivals a use)
    for (int q = 0; q < npages; ++q) mbarrier_arrive(&empty[(i0 + q) % kStages]);
  if (live) {
    const int s = (i0 + npages + page) % kStages;
    wait_stage<kTrace>(full, s, ((i0 + npages + page) / kStages) & 1, st);
    if (lane == 0 && warp % 2 == 0 && page < 4) mark(kAttnVLanded + page);
    if (has_pos) put_pos_row(s, 1);
    const bf16* vbase = reinterpret_cast<const bf16*>(ring + s * kStageBytes) + (wkey0 % kPageKeys) * D + lane * kPer;
    for (int gg = 0; gg < group; ++gg) {
      // two sums, even and odd keys (half the chain); every index a constant,
      // so both stay in registers
      float even[kPer], odd[kPer];
#pragma unroll
      for (int e = 0; e < kPer; ++e) even[e] = odd[e] = 0.0f;
      // acc += p_t v_t (rows past the sequence are never read: stale bits)
      auto add_key = [&](int t, float (&acc)[kPer]) {
        float vv[kPer];
        load_vec<bf16, kPer>(vbase + t * D, vv);
        const float pt = s_p[gg * 32 + t];
#pragma unroll
        for (int e = 0; e < kPer; ++e) acc[e] = fmaf(pt, vv[e], acc[e]);
      };
      int t = 0;
#pragma unroll 4
      for (; t + 1 < nvis; t += 2) {
        add_key(t, even);
        add_key(t + 1, odd);
      }
      if (t < nvis) add_key(t, even);
#pragma unroll
      for (int e = 0; e < kPer; ++e) s_acc[(warp * kMaxGroup + gg) * kMaxD + lane * kPer + e] = even[e] + odd[e];
    }
  }
  __syncwarp();
  if (tid == 0) mark(kAttnPvDone);
  if (has_pos && lane == 0) mark(kAttnPosPvDone);
  if (lane == 0)
    for (int q = 0; q < npages; ++q) mbarrier_arrive(&empty[(i0 + npages + q) % kStages]);
  consumers_sync();
  if (tid == 0) mark(kAttnMerge);
  for (int idx = tid; idx < group * D; idx += kConsumers) {
    const int gg = idx / D, d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) mx = fmaxf(mx, s_wm[w * kMaxGroup + gg]);
    float sum = 0.0f, a = 0.0f;
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) {
      const float mw = s_wm[w * kMaxGroup + gg];
      if (mw == -INFINITY) continue;  // no visible key in warp w
      const float wt = expf(mw - mx);
      sum = fmaf(s_wl[w * kMaxGroup + gg], wt, sum);
      a = fmaf(s_acc[(w * kMaxGroup + gg) * kMaxD + d], wt, a);
    }
    const int64_t at = static_cast<int64_t>(h0 + gg) * D + d;
    if constexpr (F) store_flagged(p.attn_f + at, a / sum, tags.out);
    else store(p.attn_out + at, a / sum);
  }
  if (tid == 0) mark(kAttnEnd);
}

// The o projection's input: the attention output of every head, merged
// from the split partials, out = sum_q acc_q e^(m_q - M) / sum_q l_q e^(m_q - M)
// (M = max_q m_q), rounded to bf16. In passes of 2048 outputs (8 per
// thread), the passes' partials come into shared memory (the attention
// area) a chunk of splits at a time, one round trip each; chunks after the
// first (long contexts) merge into the running result.
__device__ void stage_attention(const Params& p, int len, bf16* xs, unsigned char* smem, unsigned long long* loaded) {
  constexpr int kPerThread = 8, kPass = kPerThread * kConsumers;
  const int tid = threadIdx.x;
  const int D = p.D, heads = p.heads, group = heads / p.kv_heads;
  const int nsplit = attention_splits(p, len);
  float* s_part = reinterpret_cast<float*>(smem + SmemLayout::kHeads);
  const int pass_heads = kPass / D;
  const int chunk = min(nsplit, SmemLayout::kAttentionBytes / 4 / (pass_heads * (D + 2)));
  for (int h_begin = 0; h_begin < heads; h_begin += pass_heads) {
    const int nh = min(pass_heads, heads - h_begin);
    float M[kPerThread], Lsum[kPerThread], A[kPerThread];
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      M[j] = -INFINITY;
      Lsum[j] = 0.0f;
      A[j] = 0.0f;
    }
    for (int q0 = 0; q0 < nsplit; q0 += chunk) {
      const int nq = min(chunk, nsplit - q0);
      // s_part[(hh nq + q)][D + 2] <- partial[g][q0 + q][gg][D + 2] of head h_begin + hh
      // As float pairs (D + 2 is even: a pair never straddles two rows), up
      // to kBatch loads in flight per thread before any is stored: a loop
      // of load-then-store would wait one L2 round trip per element.
      const int run = nq * (D + 2), pairs = nh * run / 2;
      constexpr int kBatch = 8;
      for (int e0 = tid; e0 < pairs; e0 += kBatch * kConsumers) {
        float2 v[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int e = 2 * (e0 + u * kConsumers);
          if (e >= 2 * pairs) break;
          const int hh = e / run, r = e % run, q = r / (D + 2), x = r % (D + 2);
          const int h = h_begin + hh, g = h / group, gg = h % group;
          v[u] = __ldcg(reinterpret_cast<const float2*>(
              p.partial + ((static_cast<int64_t>(g) * p.max_splits + q0 + q) * group + gg) * (D + 2) + x));
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int e = e0 + u * kConsumers;
          if (e >= pairs) break;
          reinterpret_cast<float2*>(s_part)[e] = v[u];
        }
        if (loaded && q0 == 0 && h_begin == 0 && e0 == tid) *loaded = sm_clock_after(__float_as_uint(v[0].x));
      }
      consumers_sync();
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int idx = tid + j * kConsumers;  // within the pass
        if (idx < nh * D) {
          const int hh = idx / D, d = idx % D;
          const float* base = s_part + hh * run;
          float mx = -INFINITY;
          for (int q = 0; q < nq; ++q) mx = fmaxf(mx, base[q * (D + 2)]);
          float sum = 0.0f, a = 0.0f;
          for (int q = 0; q < nq; ++q) {
            const float* pq = base + q * (D + 2);
            const float w = expf(pq[0] - mx);
            sum += pq[1] * w;
            a = fmaf(pq[2 + d], w, a);
          }
          if (q0 == 0) {
            M[j] = mx;
            Lsum[j] = sum;
            A[j] = a;
          } else {
            const float m_new = fmaxf(M[j], mx), c_old = expf(M[j] - m_new), c_chunk = expf(mx - m_new);
            Lsum[j] = Lsum[j] * c_old + sum * c_chunk;
            A[j] = A[j] * c_old + a * c_chunk;
            M[j] = m_new;
          }
        }
      }
      consumers_sync();  // s_part is rewritten next
    }
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int idx = tid + j * kConsumers;
      if (idx < nh * D) store(xs + x_frag_index(h_begin * D + idx), A[j] / Lsum[j]);
    }
  }
}

// A (global timer, cycle counter) pair read together: at a tick of the
// timer (so its resolution does not skew the pair) and the counter read once
// the timer's value has arrived.
__device__ __noinline__ void trace_sync_pair(unsigned long long* out) {
  const unsigned long long t0 = global_timer();
  unsigned long long g;
  do g = global_timer();
  while (g == t0);
  out[1] = sm_clock_after(static_cast<unsigned>(g >> 32));
  out[0] = g;
}

// The traced kernel's prober warp (block 0, lane 0): probes until the
// consumers say the step is done (*stop), about one every microsecond.
__device__ void trace_probes(const Params& p, const volatile int* stop) {
  const uint64_t policy = l2_evict_first_policy();
  const int n_ops = kOpsPerLayer * p.n_layers + 1;
  int n = 0;
  for (; n < kMaxProbes && !*stop; ++n) {
    const unsigned long long t0 = sm_clock();
    const unsigned l2 = __ldcg(&p.done[n % n_ops]);
    const unsigned long long t1 = sm_clock_after(l2);
    const unsigned hbm = load_evict_first(p.lm_head + static_cast<int64_t>(p.V - 1 - n % p.V) * p.H, policy);
    const unsigned long long t2 = sm_clock_after(hbm);
    const unsigned long long g = global_timer();
    const unsigned long long t3 = sm_clock_after(static_cast<unsigned>(g >> 32));
    g_trace_probe[4 * n] = t0;
    g_trace_probe[4 * n + 1] = t1 - t0;
    g_trace_probe[4 * n + 2] = t2 - t1;
    g_trace_probe[4 * n + 3] = t3 - t2;
    __nanosleep(500);
  }
  g_trace_probes = n;
}

// ---- the kernel ------------------------------------------------------------------
// kTrace: the HIPFORMERS_PERSISTENT_TRACE build of the kernel (its timers
// cost registers, so the plain kernel has none). F: the flagged exchange
// between ops instead of the done counters (an instantiation of its own, so
// the counters' kernels keep their registers).
template <bool kTrace, bool F>
__global__ void __launch_bounds__(kTrace ? kThreadsTraced : kThreads, 1)
    decode_step_kernel(const __grid_constant__ Params p) {
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* ring = smem;
  bf16* xs = reinterpret_cast<bf16*>(smem + SmemLayout::kX);
  float* rows_smem = reinterpret_cast<float*>(smem + SmemLayout::kRows);
  float* red = reinterpret_cast<float*>(smem + SmemLayout::kRed);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + SmemLayout::kBars);
  uint64_t* empty = full + kStages;
  uint64_t* aux_full = reinterpret_cast<uint64_t*>(smem + SmemLayout::kAuxBars);
  uint64_t* aux_empty = aux_full + kAuxSlots;
  bf16* aux = reinterpret_cast<bf16*>(smem + SmemLayout::kAux);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned G = gridDim.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], kConsumerWarps);
    }
    for (int s = 0; s < kAuxSlots; ++s) {
      mbarrier_init(&aux_full[s], 1);
      mbarrier_init(&aux_empty[s], 1);
    }
    mbarrier_fence_init();
  }
  __syncthreads();

  // kTrace: consumer thread 0 sets it when the block's last op is done
  __shared__ int trace_stop;
  if (kTrace && threadIdx.x == 0) trace_stop = 0;
  __syncthreads();
  if (warp == kConsumerWarps) {
    produce<kTrace>(p, ring, full, empty, aux, aux_full, aux_empty);
    return;
  }
  if (kTrace && warp == kConsumerWarps + 1) {  // the prober
    if (lane == 0 && blockIdx.x == 0) trace_probes(p, &trace_stop);
    return;
  }

  const int n_ops = kOpsPerLayer * p.n_layers + 1;
  const bf16* embed_row = p.embed + static_cast<int64_t>(p.ids[0]) * p.H;
  const int len = p.seq_lens[0];  // the sequence's length, this token included
  const unsigned step = F ? *p.step_counter : 0u;  // (the last block of the step before wrote it)
  const bool poll = !(p.ablate & kAblateNoWait);
  GemvState st;
  st.timing = kTrace && blockIdx.x == 0 && threadIdx.x == 0;
  // kTrace: every block's thread 0 records its op's start and end
  const bool block_timing = kTrace && threadIdx.x == 0 && blockIdx.x < kMaxTraceBlocks;
  if (block_timing) trace_sync_pair(&g_trace_sync[2 * blockIdx.x]);
  for (int k = 0; k < n_ops; ++k) {
    if (!F && k > 0 && threadIdx.x == 0 && !(p.ablate & kAblateNoWait) && load_acquire_gpu(&p.done[k - 1]) < G) {
      const unsigned long long t0 = sm_clock();
      while (load_acquire_gpu(&p.done[k - 1]) < G) trap_if_late(t0, kWaitOp, k - 1);
    }
    // (the counters: the other threads wait for thread 0's wait; the flagged
    // exchange has nothing here the previous op's closing barrier does not
    // already order)
    if constexpr (!F) consumers_sync();
    if (st.timing) g_trace[2 * k] = sm_clock();
    if (block_timing) g_trace_blocks[(k * kMaxTraceBlocks + blockIdx.x) * 2] = sm_clock();
    const int kind = op_kind(k, p.n_layers), layer = k / kOpsPerLayer;
    Tags tags;  // F: what this op polls for and stamps its outputs with
    if constexpr (F) {
      if (p.jitter) {  // (uniform: every consumer thread takes the barrier)
        if (threadIdx.x == 0) {
          uint32_t h = (blockIdx.x * 2654435761u) ^ (static_cast<uint32_t>(k) * 40503u) ^ (step * 2246822519u);
          h ^= h >> 13;
          h *= 3266489917u;
          h ^= h >> 16;
          __nanosleep(h % 4096u);
        }
        consumers_sync();
      }
      tags.k = k;
      tags.out = flag_tag(step, n_ops, k);
      tags.in = poll && k > 0 ? flag_tag(step, n_ops, k - 1) : 0u;
      // the residual rows o and down add to: the down before o (k - 3), the o before down (k - 2)
      if (kind == kOpO && layer > 0 && poll) tags.residual = flag_tag(step, n_ops, k - 3);
      if (kind == kOpDown && poll) tags.residual = flag_tag(step, n_ops, k - 2);
    }
    // The op's aux operands (norm weights) in shared memory, once landed.
    const Aux a = aux_of(p, k);
    const bf16* aux_w = nullptr;
    int aux_slot = -1;
    if (a.n[0] > 0) {
      aux_slot = st.aux_i % kAuxSlots;
      ring_wait(&aux_full[aux_slot], (st.aux_i / kAuxSlots) & 1, kWaitAux, k);
      aux_w = aux + aux_slot * kAuxElems;
      ++st.aux_i;
    }
    if (kind == kOpAttention) {
      const Layer& L = p.layers[layer];
      const bf16* qn = aux_w ? aux_w : L.q_norm;
      const bf16* kn = aux_w ? aux_w + p.D : L.k_norm;
      if (whole_heads(p, len)) {
        if (p.D == 128) attention_whole<4, kTrace, F>(p, layer, len, smem, ring, full, empty, qn, kn, st, tags);
        else attention_whole<2, kTrace, F>(p, layer, len, smem, ring, full, empty, qn, kn, st, tags);
      } else if (p.D == 128) {
        attention_op<4, kTrace, F>(p, layer, len, smem, ring, full, empty, qn, kn, st, tags);
      } else {
        attention_op<2, kTrace, F>(p, layer, len, smem, ring, full, empty, qn, kn, st, tags);
      }
    } else {
      const Gemv g = gemv_of(p, k);
      unsigned long long* loaded = kTrace && st.timing ? &g_trace_loaded[k] : nullptr;
      // (one call site per staging kind: each inlined copy costs registers)
      // A block with no tile of the op has no use for its input. (The flagged
      // exchange depends on it: such a block's reads would be tied to no
      // output, so the words could be overwritten by a later op while it
      // polls them.)
      const bool no_stage = (p.ablate & kAblateNoStage) || (kind == kOpO && (p.ablate & kAblateNoAttention)) ||
                            static_cast<int>(blockIdx.x) >= g.tiles;
      if (no_stage) {
        // time only: the input stays whatever the last op staged
      } else if (!F && kind == kOpO && !p.merge_in_attention) {
        if constexpr (!F) stage_attention(p, len, xs, smem, loaded);
      } else if (kind == kOpO || kind == kOpDown) {
        const bool o = kind == kOpO;
        stage_plain<F>(o ? p.attn_out : p.act, o ? p.attn_f : p.act_f, tags.in, k, o ? p.heads * p.D : p.I, xs,
                       loaded);
      } else {  // q|k|v, gate|up, lm_head: the residual stream, normalised (layer 0's q|k|v: the embedding)
        const bool embedding = kind == kOpQkv && layer == 0;
        stage_norm<F>(embedding ? embed_row : p.hidden, embedding ? nullptr : p.hidden_f, tags.in, k, aux_w, p.H,
                      p.eps, xs, red, loaded);
      }
      consumers_sync();
      if (st.timing) g_trace_staged[k] = sm_clock();
      if (aux_slot >= 0 && threadIdx.x == 0) mbarrier_arrive(&aux_empty[aux_slot]);  // staged: the slot may refill
      gemv_tiles<kTrace, F>(p, k, g, xs, ring, full, empty, rows_smem, embed_row, st, tags);
    }
    consumers_sync();  // every output of this block's part of op k is stored
    if (kind == kOpAttention && aux_slot >= 0 && threadIdx.x == 0) mbarrier_arrive(&aux_empty[aux_slot]);
    if (st.timing) {
      g_trace[2 * k + 1] = sm_clock();
      g_trace_stall[2 * k] = st.stall;
      st.stall = 0;
    }
    if (block_timing) g_trace_blocks[(k * kMaxTraceBlocks + blockIdx.x) * 2 + 1] = sm_clock();
    if (!F && threadIdx.x == 0) arrive_release(&p.done[k]);
  }
  if (kTrace && threadIdx.x == 0) *static_cast<volatile int*>(&trace_stop) = 1;
  if (st.timing) trace_sync_pair(&g_trace_sync[2 * kMaxTraceBlocks]);
  // argmax: the block's largest key, then across blocks
  for (int o = 16; o > 0; o >>= 1) st.best = max_u64(st.best, shfl_xor_u64(st.best, o));
  if (lane == 0 && st.best != 0) atomicMax(p.best, st.best);
  consumers_sync();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(p.exit_count, 1u) == G - 1) {  // the last block: every other one is done
      __threadfence();
      const unsigned long long best = atomicExch(p.best, 0ull);
      *p.next = best == 0 ? 0 : argmax_key_index(best);  // 0: no logits (an ablation's step), still a valid id
      if (F) *p.step_counter = step + 1;
      for (int k = 0; k < n_ops; ++k) p.done[k] = 0;
      *p.exit_count = 0;
    }
  }
}

template <typename T> const T* ptr(const Tensor* t) { return static_cast<const T*>(t->raw_data()); }
template <typename T> T* mut(Tensor* t) { return static_cast<T*>(t->mutable_raw_data()); }

struct DeviceInfo {
  bool ok = false;
  int sms = 0;
  std::string why;
};

DeviceInfo device_info(int dev) {
  constexpr int kMaxDevices = 64;
  static std::once_flag once[kMaxDevices];
  static DeviceInfo info[kMaxDevices];
  if (dev < 0 || dev >= kMaxDevices) return {false, 0, "device index out of range"};
  std::call_once(once[dev], [dev] {
    DeviceInfo& d = info[dev];
    int major = 0, coop = 0, smem = 0;
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
    if (major < 9) d.why = "needs sm_90 or newer (bulk copies, mbarriers)";
    else if (!coop) d.why = "the device has no cooperative launch";
    else if (smem < SmemLayout::kTotal) d.why = "the device has too little shared memory per block";
    else {
      int cur = 0;
      check(cudaGetDevice(&cur), "cudaGetDevice");
      check(cudaSetDevice(dev), "cudaSetDevice");
      for (auto kernel : {decode_step_kernel<false, false>, decode_step_kernel<true, false>,
                          decode_step_kernel<false, true>, decode_step_kernel<true, true>})
        check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SmemLayout::kTotal),
              "cudaFuncSetAttribute");
      int per_sm = 0;
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, decode_step_kernel<true, true>, kThreadsTraced,
                                                          SmemLayout::kTotal),
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
      check(cudaSetDevice(cur), "cudaSetDevice");
      if (per_sm < 1) d.why = "the kernel does not fit an SM";
      else d.ok = true;
    }
  });
  return info[dev];
}

// Scratch layout (F32 elements): done [n_ops], exit [1], merge counters
// [kv_heads], the step counter [1], pad to 8 bytes, best (2 elements), pad
// to 16 bytes, the merged attention output (heads D bf16), the flagged
// words (hidden [kMaxH], q|k|v [(heads + 2 kv_heads) D], act [kMaxIn],
// attention output [heads D], each from a 16-byte boundary), partials.
struct ScratchLayout {
  int64_t done, exit, merge, step, best, attn, hidden_f, qkv_f, act_f, attn_f, partial, total;
  ScratchLayout(int64_t n_layers, int64_t kv_heads, int64_t heads, int64_t D, int64_t max_splits) {
    auto align4 = [](int64_t e) { return (e + 3) / 4 * 4; };
    done = 0;
    exit = done + kOpsPerLayer * n_layers + 1;
    merge = exit + 1;
    step = merge + kv_heads;
    best = (step + 1 + 1) / 2 * 2;
    attn = align4(best + 2);
    hidden_f = align4(attn + heads * D / 2);
    qkv_f = hidden_f + kMaxH;
    act_f = align4(qkv_f + (heads + 2 * kv_heads) * D);
    attn_f = act_f + kMaxIn;
    partial = align4(attn_f + heads * D);
    total = partial + max_splits * heads * (D + 2);
  }
};

int64_t max_splits_for(int64_t max_seq_len) { return (max_seq_len + kPageKeys - 1) / kPageKeys; }

int g_trace_layers = 0, g_trace_grid = 0, g_trace_attn_blocks = 0;
bool g_trace_flagged = false;

// The trace (HIPFORMERS_PERSISTENT_TRACE), printed at exit for the last step.
// Cycle counts become microseconds at the rate block 0 measured over the
// step (its cycles over its global-timer nanoseconds); block b's cycles
// become block 0's through the (timer, cycles) pair each read at its start.
void print_trace() {
  const int n_ops = kOpsPerLayer * g_trace_layers + 1;
  const int G = std::min(g_trace_grid, kMaxTraceBlocks);
  unsigned long long t[2 * kMaxOps] = {}, stall[2 * kMaxOps] = {}, staged[kMaxOps] = {}, loaded[kMaxOps] = {};
  unsigned long long sync[(kMaxTraceBlocks + 1) * 2] = {};
  std::vector<unsigned long long> probe(4 * kMaxProbes);
  int n_probes = 0;
  std::vector<unsigned long long> tb(static_cast<std::size_t>(n_ops) * kMaxTraceBlocks * 2);
  auto fetch = [](void* dst, const void* symbol, std::size_t bytes) {
    return cudaMemcpyFromSymbol(dst, symbol, bytes) == cudaSuccess;
  };
  constexpr std::size_t u64 = sizeof(unsigned long long);
  if (G <= 0 || !fetch(t, g_trace, u64 * 2 * n_ops) || !fetch(loaded, g_trace_loaded, u64 * n_ops) ||
      !fetch(stall, g_trace_stall, u64 * 2 * n_ops) || !fetch(staged, g_trace_staged, u64 * n_ops) ||
      !fetch(probe.data(), g_trace_probe, u64 * probe.size()) || !fetch(&n_probes, &g_trace_probes, sizeof(int)) ||
      !fetch(sync, g_trace_sync, sizeof(sync)) ||
      !fetch(tb.data(), g_trace_blocks, u64 * tb.size()))
    return;
  const double ns = static_cast<double>(sync[2 * kMaxTraceBlocks] - sync[0]);
  const double cycles = static_cast<double>(sync[2 * kMaxTraceBlocks + 1] - sync[1]);
  if (ns <= 0 || cycles <= 0) return;
  const double per_us = cycles / ns * 1e3;  // cycles a microsecond
  auto us = [&](double c) { return c / per_us; };
  const char* names[] = {"qkv", "attention", "o", "gate_up", "down", "lm_head"};

  // Block 0's view.
  double busy[6] = {}, gap[6] = {}, empty[6] = {}, full[6] = {}, staging[6] = {}, loads[6] = {};
  int count[6] = {};
  for (int k = 0; k < n_ops; ++k) {
    const int kind = k == n_ops - 1 ? kOpLmHead : k % kOpsPerLayer;
    ++count[kind];
    busy[kind] += us(static_cast<double>(t[2 * k + 1] - t[2 * k]));
    if (kind != kOpAttention && staged[k] >= t[2 * k]) staging[kind] += us(static_cast<double>(staged[k] - t[2 * k]));
    if (kind != kOpAttention && loaded[k] >= t[2 * k]) loads[kind] += us(static_cast<double>(loaded[k] - t[2 * k]));
    if (k + 1 < n_ops) gap[kind] += us(static_cast<double>(t[2 * k + 2] - t[2 * k + 1]));
    empty[kind] += us(static_cast<double>(stall[2 * k]));
    full[kind] += us(static_cast<double>(stall[2 * k + 1]));
  }
  std::fprintf(stderr, "persistent decode step trace (last step; SM clock %.0f MHz): %.1f us from op 0 to the end\n",
               per_us, us(static_cast<double>(t[2 * n_ops - 1] - t[0])));
  if (g_trace_flagged)
    std::fprintf(stderr, "  (flagged exchange: an op starts without waiting; its wait for its input is inside \"busy\", "
                         "\"of it: loads\" and \"of it: input\", and \"then waiting\" and the handoff are ~0)\n");
  std::fprintf(stderr, "block 0 (us, all layers):\n  %-10s %10s %12s %12s %14s %14s %16s\n", "op", "busy",
               "of it: loads", "of it: input", "of it: no data", "then waiting", "producer blocked");
  for (int i = 0; i < 6; ++i)
    std::fprintf(stderr, "  %-10s %10.1f %12.1f %12.1f %14.1f %14.1f %16.1f\n", names[i], busy[i], loads[i], staging[i],
                 empty[i], gap[i], full[i]);

  // Every block: when each started and ended each op, on block 0's clock.
  // (differences taken in integers first: the timer counts from the epoch in
  // ns, beyond a double's exact range)
  auto diff = [](unsigned long long a, unsigned long long b) {
    return static_cast<double>(static_cast<long long>(a - b));
  };
  auto in_frame = [&](int b, unsigned long long c) {  // block b's cycle count c, as cycles since block 0 started
    return diff(c, sync[2 * b + 1]) + diff(sync[2 * b], sync[0]) * per_us / 1e3;
  };
  auto at = [&](int k, int b, int w) {  // block b's start (w 0) or end (1) of op k, the same way
    return in_frame(b, tb[(static_cast<std::size_t>(k) * kMaxTraceBlocks + b) * 2 + w]);
  };
  double span[6] = {}, skew[6] = {}, handoff[6] = {}, mean_busy[6] = {};
  std::vector<int> last_hits(static_cast<std::size_t>(6) * G, 0);
  for (int k = 0; k < n_ops; ++k) {
    const int kind = k == n_ops - 1 ? kOpLmHead : k % kOpsPerLayer;
    double s_min = 1e300, s_max = -1e300, e_max = -1e300, sum = 0;
    int last = 0;
    for (int b = 0; b < G; ++b) {
      const double s0 = at(k, b, 0), e0 = at(k, b, 1);
      s_min = std::min(s_min, s0);
      s_max = std::max(s_max, s0);
      if (e0 > e_max) e_max = e0, last = b;
      sum += e0 - s0;
    }
    span[kind] += us(e_max - s_min);
    skew[kind] += us(s_max - s_min);
    mean_busy[kind] += us(sum / G);
    if (k + 1 < n_ops) {
      double next_min = 1e300;
      for (int b = 0; b < G; ++b) next_min = std::min(next_min, at(k + 1, b, 0));
      handoff[kind] += us(next_min - e_max);
    }
    ++last_hits[static_cast<std::size_t>(kind) * G + last];
  }
  std::fprintf(stderr, "every block (%d; us, all layers):\n  %-10s %10s %12s %12s %12s  %s\n", G, "op",
               "first start to last end", "start skew", "mean busy", "handoff", "block most often last");
  for (int i = 0; i < 6; ++i) {
    int best = 0;
    for (int b = 1; b < G; ++b)
      if (last_hits[static_cast<std::size_t>(i) * G + b] > last_hits[static_cast<std::size_t>(i) * G + best]) best = b;
    std::fprintf(stderr, "  %-10s %10.1f %12.1f %12.1f %12.1f  %d (%d of %d ops)\n", names[i], span[i], skew[i],
                 mean_busy[i], handoff[i], best, last_hits[static_cast<std::size_t>(i) * G + best], count[i]);
  }
  // The probes, each under the op block 0 was in (or waiting after) when it began.
  double l2[6] = {}, hbm[6] = {}, timer[6] = {};
  int taken[6] = {};
  for (int i = 0, k = 0; i < std::min(n_probes, kMaxProbes); ++i) {
    const unsigned long long t0 = probe[4 * static_cast<std::size_t>(i)];
    if (t0 < t[0]) continue;  // before the first op
    while (k + 1 < n_ops && t0 >= t[2 * (k + 1)]) ++k;
    const int kind = k == n_ops - 1 ? kOpLmHead : k % kOpsPerLayer;
    ++taken[kind];
    l2[kind] += us(static_cast<double>(probe[4 * static_cast<std::size_t>(i) + 1])) * 1e3;
    hbm[kind] += us(static_cast<double>(probe[4 * static_cast<std::size_t>(i) + 2])) * 1e3;
    timer[kind] += us(static_cast<double>(probe[4 * static_cast<std::size_t>(i) + 3])) * 1e3;
  }
  std::fprintf(stderr, "latency probes in block 0 while the step runs (ns, mean):\n  %-10s %8s %10s %10s %18s\n", "op",
               "probes", "L2 load", "HBM load", "global timer read");
  for (int i = 0; i < 6; ++i)
    if (taken[i])
      std::fprintf(stderr, "  %-10s %8d %10.0f %10.0f %18.0f\n", names[i], taken[i], l2[i] / taken[i],
                   hbm[i] / taken[i], timer[i] / taken[i]);

  // The first whole-head attention block (the grid's last), layer by layer:
  // its two hand-offs and what it waited for in between (g_trace_attn).
  const int ab = g_trace_grid - 1, na = g_trace_attn_blocks;
  std::vector<unsigned long long> ev(static_cast<std::size_t>(kMaxLayers) * kAttnEvents);
  if (na <= 0 || ab >= kMaxTraceBlocks || !fetch(ev.data(), g_trace_attn, u64 * ev.size())) return;
  const char* what[] = {"q|k|v hand-off: the qkv op's last block done -> q|k|v in shared memory",
                        "  (its own wait: the attention op begins -> q|k|v in)",
                        "q/k norm + RoPE + the new key and value",
                        "  of it: warp 0's q norm + RoPE (q|k|v in -> its norm done)",
                        "  K page 0 landed, after that (<= 0: already there)",
                        "scores + softmax (warp 0, from the later of the two)",
                        "  the warp holding key pos scored, after warp 0",
                        "  the last V page landed, after the scores (<= 0: already there)",
                        "p . v + the warps' merge + the stores",
                        "  of it: warp 0's p . v, from the later of its scores and the last V page",
                        "    the warp holding key pos: its p . v done, after warp 0's",
                        "    the warps' barrier passed, after the later of those two",
                        "    the merge and the stores (the barrier passed -> done)",
                        "attention hand-off: the last attention block done -> block 0's o loads returned",
                        "a V page's copy: issued -> landed (mean of the pages)",
                        "K page 0's copy: issued -> landed"};
  constexpr int kRows = 16;
  double sum[kRows] = {}, worst[kRows] = {};
  for (int i = 0; i < kRows; ++i) worst[i] = -1e300;
  int layers = 0;
  for (int l = 0; l < g_trace_layers; ++l) {
    const unsigned long long* e = &ev[static_cast<std::size_t>(l) * kAttnEvents];
    if (!e[kAttnStart] || !e[kAttnEnd]) continue;
    const int kq = l * kOpsPerLayer, ka = kq + 1, ko = kq + 2;
    double qkv_end = -1e300, attn_end = -1e300;
    for (int b = 0; b < G; ++b) qkv_end = std::max(qkv_end, at(kq, b, 1));
    for (int b = std::max(0, G - na); b < G; ++b) attn_end = std::max(attn_end, at(ka, b, 1));
    int pages = 0;
    unsigned long long v_last = 0;
    double v_copy = 0;
    for (int q = 0; q < 4; ++q)
      if (e[kAttnVLanded + q] && e[kAttnVIssued + q] && e[kAttnVLanded + q] > e[kAttnStart]) {
        v_last = std::max(v_last, e[kAttnVLanded + q]);
        v_copy += diff(e[kAttnVLanded + q], e[kAttnVIssued + q]);
        ++pages;
      }
    if (!pages) continue;
    auto c = [&](int event) { return static_cast<double>(e[event]); };
    const double row[kRows] = {
        in_frame(ab, e[kAttnQkvIn]) - qkv_end,
        c(kAttnQkvIn) - c(kAttnStart),
        c(kAttnRoped) - c(kAttnQkvIn),
        c(kAttnNormed) - c(kAttnQkvIn),
        c(kAttnKLanded) - c(kAttnRoped),
        c(kAttnScored) - std::max(c(kAttnRoped), c(kAttnKLanded)),
        c(kAttnPosScored) - c(kAttnScored),
        static_cast<double>(v_last) - c(kAttnScored),
        c(kAttnEnd) - std::max(c(kAttnScored), static_cast<double>(v_last)),
        c(kAttnPvDone) - std::max(c(kAttnScored), static_cast<double>(v_last)),
        c(kAttnPosPvDone) - c(kAttnPvDone),
        c(kAttnMerge) - std::max(c(kAttnPvDone), c(kAttnPosPvDone)),
        c(kAttnEnd) - c(kAttnMerge),
        loaded[ko] ? diff(loaded[ko], sync[1]) - attn_end : 0.0,
        v_copy / pages,
        diff(e[kAttnKLanded], e[kAttnKIssued])};
    for (int i = 0; i < kRows; ++i) {
      sum[i] += us(row[i]);
      worst[i] = std::max(worst[i], us(row[i]));
    }
    ++layers;
  }
  if (!layers) return;
  std::fprintf(stderr, "the first attention block (block %d of %d attention blocks), per layer (us; mean, worst of %d):\n",
               ab, na, layers);
  for (int i = 0; i < kRows; ++i)
    std::fprintf(stderr, "  %-80s %7.2f %7.2f\n", what[i], sum[i] / layers, worst[i]);
}

}  // namespace

int64_t decode_step_scratch_elems(int64_t n_layers, int64_t kv_heads, int64_t heads, int64_t head_dim,
                                  int64_t max_seq_len) {
  return ScratchLayout(n_layers, kv_heads, heads, head_dim, max_splits_for(max_seq_len)).total;
}

bool decode_step_device_ok(int device, std::string* why) {
#if defined(HIPFORMERS_EMULATE_WAVE64)
  if (why) *why = "not in wave64-emulation builds";
  return false;
#else
  const DeviceInfo d = device_info(device);
  if (!d.ok && why) *why = d.why;
  return d.ok;
#endif
}

int decode_step_max_layers() { return kMaxLayers; }
int decode_step_max_input() { return kMaxIn; }
// whole_heads(): a kv head's K and V pages all in the ring at once
int decode_step_whole_head_keys() { return kStages / 2 * kPageKeys; }

void decode_step_launch(const DecodeStepArgs& a) {
  const int dev = a.hidden->device().index;
  const DeviceInfo d = device_info(dev);
  if (!d.ok) throw_error(ErrorKind::kUnsupported, "persistent decode step: " + d.why);
  Params p{};
  const int64_t H = a.hidden->shape().dims().back();
  const int64_t n_layers = static_cast<int64_t>(a.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    const DecodeStepLayer& s = a.layers[l];
    Layer& L = p.layers[l];
    L.input_norm = ptr<bf16>(s.input_norm);
    L.qkv = ptr<bf16>(s.qkv_proj);
    L.q_norm = s.q_norm && s.q_norm->defined() ? ptr<bf16>(s.q_norm) : nullptr;
    L.k_norm = s.k_norm && s.k_norm->defined() ? ptr<bf16>(s.k_norm) : nullptr;
    L.o = ptr<bf16>(s.o_proj);
    L.post_norm = ptr<bf16>(s.post_attention_norm);
    L.gate_up = ptr<bf16>(s.gate_up_proj);
    L.down = ptr<bf16>(s.down_proj);
    L.k_pool = static_cast<bf16*>(const_cast<void*>(s.cache->k.raw_data()));
    L.v_pool = static_cast<bf16*>(const_cast<void*>(s.cache->v.raw_data()));
  }
  p.embed = ptr<bf16>(a.embed_tokens);
  p.final_norm = ptr<bf16>(a.final_norm);
  p.lm_head = ptr<bf16>(a.lm_head);
  p.ids = ptr<int32_t>(a.ids);
  p.seq_lens = ptr<int32_t>(&a.batch->seq_lens);
  p.block_table = ptr<int32_t>(&a.batch->block_table);
  p.hidden = mut<bf16>(a.hidden);
  p.qkv = mut<bf16>(a.qkv);
  p.act = mut<bf16>(a.act);
  p.logits = mut<bf16>(a.logits);
  p.next = mut<int32_t>(a.next);
  p.n_layers = static_cast<int>(n_layers);
  p.H = static_cast<int>(H);
  p.I = static_cast<int>(a.act->shape().dims().back());
  p.V = static_cast<int>(a.logits->shape().dims().back());
  p.heads = static_cast<int>(a.heads);
  p.kv_heads = static_cast<int>(a.kv_heads);
  p.D = static_cast<int>(a.head_dim);
  const int64_t max_seq_len = a.batch->block_table.shape().dims().back() * kKVPageSize;
  p.max_splits = static_cast<int>(max_splits_for(max_seq_len));
  const ScratchLayout sl(n_layers, a.kv_heads, a.heads, a.head_dim, p.max_splits);
  if (a.scratch->numel() < sl.total) throw_invalid("persistent decode step: the scratch is too small");
  float* scratch = mut<float>(a.scratch);
  p.done = reinterpret_cast<unsigned*>(scratch + sl.done);
  p.exit_count = reinterpret_cast<unsigned*>(scratch + sl.exit);
  p.best = reinterpret_cast<unsigned long long*>(scratch + sl.best);
  p.partial = scratch + sl.partial;
  p.merge_count = reinterpret_cast<unsigned*>(scratch + sl.merge);
  p.attn_out = reinterpret_cast<bf16*>(scratch + sl.attn);
  p.step_counter = reinterpret_cast<unsigned*>(scratch + sl.step);
  p.hidden_f = reinterpret_cast<uint32_t*>(scratch + sl.hidden_f);
  p.qkv_f = reinterpret_cast<uint32_t*>(scratch + sl.qkv_f);
  p.act_f = reinterpret_cast<uint32_t*>(scratch + sl.act_f);
  p.attn_f = reinterpret_cast<uint32_t*>(scratch + sl.attn_f);
  // read per launch: the tests switch them
  auto env_is = [](const char* name, const char* value) {
    const char* v = std::getenv(name);
    return v && std::string(v) == value;
  };
  // the flagged exchange by default (faster in every run since the eighth
  // session, docs/PERFORMANCE.md); HIPFORMERS_PERSISTENT_EXCHANGE=counters
  // for the done counters
  const bool flagged = !env_is("HIPFORMERS_PERSISTENT_EXCHANGE", "counters");
  p.whole_heads = !env_is("HIPFORMERS_PERSISTENT_ATTENTION", "split");
  p.merge_in_attention = flagged || p.whole_heads || env_is("HIPFORMERS_PERSISTENT_MERGE", "attention");
  {
    const char* v = std::getenv("HIPFORMERS_PERSISTENT_HEAD_PARTS");
    const int group = static_cast<int>(a.heads / a.kv_heads), kvh = static_cast<int>(a.kv_heads);
    // the most parts that divide the group with every part a block of its own
    int parts = group;
    while (parts > 1 && (group % parts != 0 || kvh * parts > d.sms)) --parts;
    if (v && *v) {
      const int asked = std::atoi(v);
      if (asked >= 1 && group % asked == 0 && kvh * asked <= d.sms) parts = asked;
    }
    p.head_parts = parts;
  }
  p.jitter = flagged && env_is("HIPFORMERS_PERSISTENT_JITTER", "1");
  p.rope_once = !env_is("HIPFORMERS_PERSISTENT_ROPE_ONCE", "0");
  p.rope = qk_norm_rope_args(*a.inv_freq, a.head_dim, a.eps, a.rope_scaling, DType::kBF16);
  p.eps = static_cast<float>(a.eps);
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.head_dim)));
  static const bool trace = [] {
    const char* v = std::getenv("HIPFORMERS_PERSISTENT_TRACE");
    return v && *v && std::string(v) != "0";
  }();
  if (trace) {
    static std::once_flag once;
    g_trace_layers = p.n_layers;
    g_trace_grid = d.sms;
    g_trace_attn_blocks = p.whole_heads ? p.kv_heads * p.head_parts : 0;
    g_trace_flagged = flagged;
    std::call_once(once, [] { std::atexit(print_trace); });
  }
  static const bool l2_hint = [] {
    const char* v = std::getenv("HIPFORMERS_PERSISTENT_L2_HINT");
    return !(v && std::string(v) == "0");
  }();
  p.l2_hint = l2_hint;
  static const int inflight = [] {
    const char* v = std::getenv("HIPFORMERS_PERSISTENT_INFLIGHT");
    const int n = v && *v ? std::atoi(v) : kDefaultInflight;
    return n > 0 && n < kStages ? n : 0;
  }();
  p.inflight = inflight;
  {
    const char* v = std::getenv("HIPFORMERS_PERSISTENT_KV_PREFETCH");
    const int n = v && *v ? std::atoi(v) : 0;
    p.kv_prefetch = n > 0 ? n : 0;
  }
  p.tile_segments = env_is("HIPFORMERS_PERSISTENT_TILE_SEGMENTS", "1");
  static const int tile_groups_log2 = [] {
    const char* v = std::getenv("HIPFORMERS_PERSISTENT_TILE_GROUPS");
    const int n = v ? std::atoi(v) : 4;
    return n == 8 ? 3 : n == 4 ? 2 : n == 2 ? 1 : 0;
  }();
  p.tile_groups_log2 = tile_groups_log2;
  static const unsigned ablate = [] {
    const char* v = std::getenv("HIPFORMERS_PERSISTENT_ABLATE");
    const unsigned bits = v ? static_cast<unsigned>(std::strtoul(v, nullptr, 0)) & 31u : 0u;
    if (bits)
      std::fprintf(stderr, "persistent decode step: HIPFORMERS_PERSISTENT_ABLATE=%u: time only, the outputs are wrong\n",
                   bits);
    return bits;
  }();
  p.ablate = ablate;
  // With the flagged exchange, leaving out staging, the attention or the
  // stores also leaves out what ties one op's writes to the reads before
  // them (or the writes a poll waits for): those ablations poll nothing.
  if (flagged && (p.ablate & (kAblateNoStage | kAblateNoAttention | kAblateNoStores))) p.ablate |= kAblateNoWait;

  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(d.sms));
  config.blockDim = dim3(trace ? kThreadsTraced : kThreads);
  auto kernel = flagged ? (trace ? decode_step_kernel<true, true> : decode_step_kernel<false, true>)
                        : (trace ? decode_step_kernel<true, false> : decode_step_kernel<false, false>);
  config.dynamicSmemBytes = SmemLayout::kTotal;
  config.stream = stream_for(dev);
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeCooperative;  // every block resident at once: they wait on each other
  attribute[0].val.cooperative = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  check(cudaLaunchKernelEx(&config, kernel, p),
        "cudaLaunchKernelEx (persistent decode step)");
}

}  // namespace hipformers::kernels::gpu
