// Prototype, not part of the runtime: can a batch-1 decode step's chain of
// dependent GEMVs run near the memory bandwidth as ONE persistent kernel?
//
// The measured floor of the per-kernel step (docs/PERFORMANCE.md,
// 2026-12-06 third session) is the chain itself: each kernel's blocks hold
// their weight loads in registers until they retire, so the next kernel's
// loads start late. Here one block per SM runs every op of the step:
//   - a producer thread streams the block's weight tiles (R consecutive
//     rows, <= 16 KB, one bulk copy each) into a ring of shared-memory
//     stages, running ahead across op boundaries (weights depend on nothing);
//   - 8 consumer warps wait for the previous op to be complete (a global
//     counter every block adds to once per op), stage the op's input vector
//     in shared memory, and multiply the tiles as they land;
//   - op k's input is op k-1's output (two alternating vectors).
// The ops are the Qwen3-0.6B step's projections: 28 x (q|k|v 4096x1024,
// o 1024x2048, gate|up 6144x1024, down 1024x3072), then the lm_head
// 151936x1024: 1.19 GB of bf16 weights. Printed: ms per step and GB/s, with
// the dependency as counters, as flagged words (each output carries a tag
// of its step and op, and the next op polls its input: one round trip, no
// counter), without it, and the copies alone; and the last op's outputs of
// both dependency kinds against a plain one-kernel-per-op reference.
//
// CUDA sm_90 only (bulk copies, mbarriers). Its numbers (H100, 2026-12-06,
// fourth session) are in docs/PERFORMANCE.md; the runtime's persistent
// decode step (src/kernels/decode_step_sm90_gpu.cu) grew out of it.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/gpu/bulk_copy.h"      // mbarriers, bulk copies (the runtime's persistent step uses them too)
#include "kernels/gpu/flagged_words.h"  // the flagged exchange (likewise)

namespace {

using namespace hipformers::kernels::gpu;

constexpr int kConsumerWarps = 8;
constexpr int kThreads = (kConsumerWarps + 1) * 32;  // + the producer warp
constexpr int kStages = 8;
constexpr int kStageBytes = 16384;
constexpr int kMaxIn = 3072;
constexpr int kMaxOps = 128;

struct Op {
  const __nv_bfloat16* w;  // [out, in]
  int out, in, rows;       // rows per tile (R)
  int tiles;
};
__constant__ Op c_ops[kMaxOps];

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "decode_stream_proto: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kConsumerWarps * 32) : "memory"); }

// The flagged-word exchange (the `flagged` variant, gpu/flagged_words.h): op
// k's outputs go out as tagged words, op k + 1's blocks poll their input
// words until every tag is op k's. Two vectors suffice, as for the counters:
// no block can write op k + 1's outputs before every block has staged op k's
// input (op k + 1 needs all of op k's outputs).

// One step: every op in order. done[k] counts the blocks that finished op
// k over all steps that count (not the flagged or copies-alone ones); the
// `counted`-th such step waits for done[k - 1] to reach counted * gridDim.x.
// epoch numbers every step (the flagged words' tags). vec[2]: the alternating vectors (op k reads
// vec[k % 2], writes vec[(k + 1) % 2]). flagged: ops after the first read
// and every op writes the flagged words fl[2] instead (no counters).
__global__ void __launch_bounds__(kThreads, 1)
    stream_step(int n_ops, __nv_bfloat16* vec0, __nv_bfloat16* vec1, unsigned* done, unsigned epoch, int wait,
                int stream_only, uint32_t* fl0, uint32_t* fl1, int flagged, unsigned counted) {
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* stages = smem;
  __nv_bfloat16* xs = reinterpret_cast<__nv_bfloat16*>(smem + kStages * kStageBytes);
  float* partial = reinterpret_cast<float*>(xs + kMaxIn);  // [8 rows][8 parts]
  uint64_t* full = reinterpret_cast<uint64_t*>(partial + 64);
  uint64_t* empty = full + kStages;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int G = gridDim.x, b = blockIdx.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], kConsumerWarps);
    }
  }
  __syncthreads();

  if (warp == kConsumerWarps) {  // producer: the block's tiles of every op, in order
    if (lane != 0) return;
    int i = 0;
    for (int k = 0; k < n_ops; ++k) {
      const Op op = c_ops[k];
      const uint32_t bytes = static_cast<uint32_t>(op.rows) * op.in * 2;
      for (int t = b; t < op.tiles; t += G, ++i) {
        const int s = i % kStages, use = i / kStages;
        if (use > 0) mbarrier_wait(&empty[s], (use - 1) & 1);
        mbarrier_arrive_expect_tx(&full[s], bytes);
        bulk_copy_to_shared(stages + s * kStageBytes, op.w + static_cast<int64_t>(t) * op.rows * op.in, bytes, &full[s]);
      }
    }
    return;
  }

  // consumers
  int i = 0;
  if (stream_only) {  // the copies alone: take each tile and give the stage back
    for (int k = 0; k < n_ops; ++k) {
      const Op op = c_ops[k];
      for (int t = b; t < op.tiles; t += G, ++i) {
        const int s = i % kStages;
        mbarrier_wait(&full[s], (i / kStages) & 1);
        __syncwarp();
        if (lane == 0) mbarrier_arrive(&empty[s]);
      }
    }
    return;
  }
  for (int k = 0; k < n_ops; ++k) {
    const Op op = c_ops[k];
    const __nv_bfloat16* x = k % 2 == 0 ? vec0 : vec1;
    __nv_bfloat16* y = k % 2 == 0 ? vec1 : vec0;
    uint32_t* fy = k % 2 == 0 ? fl1 : fl0;  // flagged: this op's outputs
    const uint32_t tag_out = flag_tag(epoch, n_ops, k);
    if (k > 0 && wait && !flagged && threadIdx.x == 0) {
      const unsigned target = counted * static_cast<unsigned>(G);
      while (load_acquire_gpu(&done[k - 1]) < target) {
      }
    }
    consumers_sync();
    if (flagged && k > 0) {  // poll the input words until they carry op k - 1's tag
      const uint32_t* fx = k % 2 == 0 ? fl0 : fl1;
      const uint32_t tag_in = flag_tag(epoch, n_ops, k - 1);
      for (int v = threadIdx.x; v < op.in / 4; v += kConsumerWarps * 32) {
        uint4 w = load_relaxed4(fx + 4 * v);
        poll_tagged(fx + 4 * v, w, tag_in, [] {});
        reinterpret_cast<uint2*>(xs)[v] = pack_flagged4(w);
      }
    } else {
      for (int v = threadIdx.x; v < op.in / 8; v += kConsumerWarps * 32)  // through L2: written by other SMs
        reinterpret_cast<uint4*>(xs)[v] = __ldcg(reinterpret_cast<const uint4*>(x) + v);
    }
    consumers_sync();
    const int R = op.rows, parts = kConsumerWarps / R;
    const int r = warp % R, part = warp / R;
    const int span = op.in / parts, k0 = part * span, nvec = span / 8;
    for (int t = b; t < op.tiles; t += G, ++i) {
      const int s = i % kStages;
      mbarrier_wait(&full[s], (i / kStages) & 1);
      const uint4* wrow = reinterpret_cast<const uint4*>(stages + s * kStageBytes + (static_cast<int64_t>(r) * op.in + k0) * 2);
      const uint4* xrow = reinterpret_cast<const uint4*>(xs + k0);
      float acc = 0.0f;
      for (int v = lane; v < nvec; v += 32) {
        const uint4 wv = wrow[v], xv = xrow[v];
        const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&wv);
        const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&xv);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 wf = __bfloat1622float2(w2[e]), xf = __bfloat1622float2(x2[e]);
          acc = fmaf(wf.x, xf.x, acc);
          acc = fmaf(wf.y, xf.y, acc);
        }
      }
      for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
      __syncwarp();
      if (lane == 0) mbarrier_arrive(&empty[s]);  // the stage may be refilled
      const int row = t * R + r;
      if (parts == 1) {
        if (lane == 0) {
          if (flagged) store_flagged(fy + row, acc, tag_out);
          else y[row] = __float2bfloat16(acc);
        }
      } else {
        if (lane == 0) partial[r * kConsumerWarps + part] = acc;
        consumers_sync();
        if (threadIdx.x < R) {
          float sum = 0.0f;
          for (int q = 0; q < parts; ++q) sum += partial[threadIdx.x * kConsumerWarps + q];
          if (flagged) store_flagged(fy + t * R + threadIdx.x, sum, tag_out);
          else y[t * R + threadIdx.x] = __float2bfloat16(sum);
        }
        consumers_sync();  // partial is rewritten by the next tile
      }
    }
    if (flagged) continue;  // no counter: the words carry their own readiness
    consumers_sync();  // every output of the block's tiles is stored
    if (threadIdx.x == 0) {
      __threadfence();
      atomicAdd(&done[k], 1u);
    }
  }
}

// The reference: one thread per output row, one kernel per op.
__global__ void reference_gemv(const __nv_bfloat16* w, const __nv_bfloat16* x, __nv_bfloat16* y, int out, int in) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= out) return;
  float acc = 0.0f;
  for (int c = 0; c < in; ++c) acc = fmaf(__bfloat162float(w[static_cast<int64_t>(row) * in + c]), __bfloat162float(x[c]), acc);
  y[row] = __float2bfloat16(acc);
}

__global__ void fill_uniform(__nv_bfloat16* p, int64_t n, float scale, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16(scale * (static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f));
  }
}

}  // namespace

int main() {
  struct Shape {
    int out, in;
  };
  std::vector<Shape> shapes;
  for (int l = 0; l < 28; ++l) {
    shapes.push_back({4096, 1024});
    shapes.push_back({1024, 2048});
    shapes.push_back({6144, 1024});
    shapes.push_back({1024, 3072});
  }
  shapes.push_back({151936, 1024});
  const int n_ops = static_cast<int>(shapes.size());
  std::vector<Op> ops(n_ops);
  int64_t total = 0;
  for (const Shape& s : shapes) total += static_cast<int64_t>(s.out) * s.in;
  __nv_bfloat16* weights = nullptr;
  __nv_bfloat16 *vec[2] = {nullptr, nullptr}, *ref[2] = {nullptr, nullptr};
  unsigned* done = nullptr;
  uint32_t* fl[2] = {nullptr, nullptr};
  const int64_t vec_elems = 151936;
  if (!ok(cudaMalloc(&weights, total * 2), "cudaMalloc weights") || !ok(cudaMalloc(&vec[0], vec_elems * 2), "cudaMalloc") ||
      !ok(cudaMalloc(&vec[1], vec_elems * 2), "cudaMalloc") || !ok(cudaMalloc(&ref[0], vec_elems * 2), "cudaMalloc") ||
      !ok(cudaMalloc(&ref[1], vec_elems * 2), "cudaMalloc") || !ok(cudaMalloc(&done, kMaxOps * 4), "cudaMalloc") ||
      !ok(cudaMalloc(&fl[0], vec_elems * 4), "cudaMalloc") || !ok(cudaMalloc(&fl[1], vec_elems * 4), "cudaMalloc"))
    return 2;
  cudaMemset(fl[0], 0, vec_elems * 4);
  cudaMemset(fl[1], 0, vec_elems * 4);
  int64_t offset = 0;
  for (int k = 0; k < n_ops; ++k) {
    const Shape s = shapes[k];
    Op& op = ops[k];
    op.w = weights + offset;
    op.out = s.out;
    op.in = s.in;
    op.rows = std::max(1, std::min(kConsumerWarps, kStageBytes / (s.in * 2)));
    while (kConsumerWarps % op.rows != 0) --op.rows;
    op.tiles = s.out / op.rows;
    // weights ~ U(-a, a) with a = sqrt(3 / in): outputs keep the input's scale
    fill_uniform<<<1024, 256>>>(weights + offset, static_cast<int64_t>(s.out) * s.in, std::sqrt(3.0f / s.in), 1234u + k);
    offset += static_cast<int64_t>(s.out) * s.in;
  }
  if (n_ops > kMaxOps || !ok(cudaMemcpyToSymbol(c_ops, ops.data(), sizeof(Op) * n_ops), "c_ops")) return 2;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const int grid = prop.multiProcessorCount;
  const size_t smem = kStages * kStageBytes + kMaxIn * 2 + 64 * 4 + 2 * kStages * 8;
  if (!ok(cudaFuncSetAttribute(stream_step, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)), "smem"))
    return 2;
  cudaMemset(done, 0, kMaxOps * 4);
  unsigned epoch = 0, counted = 0;
  // Cooperative: every block must be resident at once (they wait on each other).
  // wait: 1 counters, 0 no waits, -1 the copies alone, 2 flagged words.
  auto launch = [&](int wait) {
    int n = n_ops, w = wait > 0 ? 1 : 0, only = wait < 0 ? 1 : 0, flagged = wait == 2 ? 1 : 0;
    unsigned e = ++epoch, c = (wait == 0 || wait == 1) ? ++counted : counted;
    void* args[] = {&n, &vec[0], &vec[1], &done, &e, &w, &only, &fl[0], &fl[1], &flagged, &c};
    return cudaLaunchCooperativeKernel(reinterpret_cast<void*>(stream_step), dim3(grid), dim3(kThreads), args, smem);
  };
  auto reset_input = [&] {
    fill_uniform<<<64, 256>>>(vec[0], 4096, 1.0f, 99u);
    fill_uniform<<<64, 256>>>(ref[0], 4096, 1.0f, 99u);
  };

  // Correctness: one step against the reference chain.
  reset_input();
  if (!ok(launch(1), "cooperative launch")) return 2;
  for (int k = 0; k < n_ops; ++k)
    reference_gemv<<<(ops[k].out + 255) / 256, 256>>>(ops[k].w, ref[k % 2], ref[(k + 1) % 2], ops[k].out, ops[k].in);
  if (!ok(cudaDeviceSynchronize(), "step")) return 2;
  std::vector<__nv_bfloat16> got(vec_elems), want(vec_elems);
  cudaMemcpy(got.data(), vec[n_ops % 2], vec_elems * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(want.data(), ref[n_ops % 2], vec_elems * 2, cudaMemcpyDeviceToHost);
  double max_err = 0, max_ref = 0;
  for (int64_t i = 0; i < shapes.back().out; ++i) {
    const double g = __bfloat162float(got[i]), w = __bfloat162float(want[i]);
    max_err = std::max(max_err, std::fabs(g - w));
    max_ref = std::max(max_ref, std::fabs(w));
  }
  std::printf("%s, %d SMs; %d ops, %.3f GB of weights\n", prop.name, grid, n_ops, total * 2 / 1e9);
  std::printf("last op's outputs vs the reference chain: max |diff| %.4g (max |ref| %.4g)\n", max_err, max_ref);
  // The flagged exchange computes the same chain (the same sums, rounded at the same points).
  reset_input();
  if (!ok(launch(2), "cooperative launch (flagged)") || !ok(cudaDeviceSynchronize(), "flagged step")) return 2;
  std::vector<uint32_t> words(vec_elems);
  cudaMemcpy(words.data(), fl[n_ops % 2], vec_elems * 4, cudaMemcpyDeviceToHost);
  double flag_err = 0;
  for (int64_t i = 0; i < shapes.back().out; ++i) {
    const uint16_t bits = static_cast<uint16_t>(words[i] & 0xffffu);
    const double g = __bfloat162float(__ushort_as_bfloat16(bits)), w = __bfloat162float(want[i]);
    flag_err = std::max(flag_err, std::fabs(g - w));
  }
  std::printf("flagged words: last op's outputs vs the reference chain: max |diff| %.4g\n", flag_err);

  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int wait : {1, 2, 0, -1}) {
    for (int w = 0; w < 5; ++w) launch(wait);
    std::vector<float> ms_list;
    for (int rep = 0; rep < 9; ++rep) {
      cudaEventRecord(start);
      constexpr int kSteps = 10;
      for (int s = 0; s < kSteps; ++s) launch(wait);
      cudaEventRecord(stop);
      if (!ok(cudaEventSynchronize(stop), "timing")) return 2;
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      ms_list.push_back(ms / kSteps);
    }
    std::sort(ms_list.begin(), ms_list.end());
    const double ms = ms_list[ms_list.size() / 2];
    std::printf("%-44s %.3f ms per step, %.0f GB/s\n",
                wait == 2   ? "flagged words (the dependency, no counters)"
                : wait == 1 ? "with the dependency waits (counters)"
                : wait == 0 ? "without them"
                            : "copies alone (no compute)",
                ms, total * 2 / (ms * 1e-3) / 1e9);
  }
  return 0;
}
