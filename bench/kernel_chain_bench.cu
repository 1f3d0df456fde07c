// What one dependency between two short kernels costs on this GPU, apart
// from any work: a chain of 224 kernels (a decode step's 28 layers x 8
// kernels) captured in one CUDA graph and replayed, each kernel reading a
// few values its predecessor wrote and writing its own. Printed per kernel,
// for grids given on the command line:
//   - "PDL + wait": programmatic dependent launch, every kernel triggers its
//     successor first thing and waits with griddepcontrol.wait (what the
//     decode step's kernels do, src/kernels/gpu/launch.h);
//   - "plain": ordinary graph edges (the wait compiles to nothing);
//   - "PDL, no wait": the same launches with no dependency at all, the
//     floor of launching and retiring the blocks (results are not ordered).
// A chain whose kernels carry a decode step's real work costs more: its
// blocks hold registers and outstanding loads (docs/PERFORMANCE.md).
//
// Usage: kernel_chain_bench [THREADS:GRID,GRID,...]...   (the grids repeat
// along the chain; default: the batch-1 layer's grids and a few uniform ones)
// CUDA only (sm_90 for the dependent launches): a measuring tool, not part
// of the runtime.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kChain = 224;
constexpr int kBufferFloats = 1 << 20;

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "kernel_chain_bench: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

enum Dependency : int { kPdlWait = 0, kPlain = 1, kNoWait = 2 };

// Reads 4 values a thread of the predecessor's output, sums them over the
// block and writes one value a thread.
template <bool kWait>
__global__ void __launch_bounds__(1024) chain_kernel(const float* in, float* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (kWait) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  __shared__ float partial[32];
  float s = 0;
  for (int i = 0; i < 4; ++i) s += in[(threadIdx.x * 4 + i) % kBufferFloats];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += partial[w];
  out[(blockIdx.x * blockDim.x + threadIdx.x) % kBufferFloats] = total * 1e-3f + threadIdx.x;
}

struct Spec {
  std::string text;
  int threads = 256;
  std::vector<int> grids;
};

bool parse(const std::string& text, Spec& spec) {
  spec.text = text;
  const auto colon = text.find(':');
  if (colon == std::string::npos) return false;
  spec.threads = std::atoi(text.substr(0, colon).c_str());
  std::stringstream list(text.substr(colon + 1));
  std::string item;
  while (std::getline(list, item, ',')) {
    const int g = std::atoi(item.c_str());
    if (g <= 0) return false;
    spec.grids.push_back(g);
  }
  return spec.threads >= 32 && spec.threads <= 1024 && spec.threads % 32 == 0 && !spec.grids.empty();
}

// Median microseconds per kernel of the chain, or a negative value on error.
double time_chain(const Spec& spec, Dependency dep, float* const buf[2], cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (!ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture")) return -1;
  for (int k = 0; k < kChain; ++k) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(spec.grids[k % spec.grids.size()]));
    config.blockDim = dim3(static_cast<unsigned>(spec.threads));
    config.stream = stream;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = dep == kPlain ? 0 : 1;
    const float* in = buf[k % 2];
    float* out = buf[(k + 1) % 2];
    const cudaError_t e = dep == kNoWait ? cudaLaunchKernelEx(&config, chain_kernel<false>, in, out)
                                         : cudaLaunchKernelEx(&config, chain_kernel<true>, in, out);
    if (!ok(e, "launch")) {
      cudaStreamEndCapture(stream, &graph);
      if (graph) cudaGraphDestroy(graph);
      return -1;
    }
  }
  if (!ok(cudaStreamEndCapture(stream, &graph), "end capture") || !ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate")) {
    if (graph) cudaGraphDestroy(graph);
    return -1;
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  constexpr int kReplays = 20;
  std::vector<float> per_replay_ms;
  bool good = true;
  for (int i = 0; i < kReplays && good; ++i) good = ok(cudaGraphLaunch(exec, stream), "replay");  // warm-up
  for (int round = 0; round < 7 && good; ++round) {
    cudaEventRecord(start, stream);
    for (int i = 0; i < kReplays && good; ++i) good = ok(cudaGraphLaunch(exec, stream), "replay");
    cudaEventRecord(stop, stream);
    good = good && ok(cudaEventSynchronize(stop), "synchronize");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    per_replay_ms.push_back(ms / kReplays);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  if (!good) return -1;
  std::sort(per_replay_ms.begin(), per_replay_ms.end());
  return per_replay_ms[per_replay_ms.size() / 2] * 1000.0 / kChain;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> texts;
  for (int i = 1; i < argc; ++i) texts.push_back(argv[i]);
  if (texts.empty())  // the batch-1 layer (norm, q|k|v, attention, o, norm, gate|up, SiLU, down), then uniform grids
    texts = {"256:1,256,8,128,1,192,2,128", "256:1", "256:8", "256:132", "256:256", "512:132"};
  std::vector<Spec> specs;
  for (const std::string& t : texts) {
    Spec s;
    if (!parse(t, s)) {
      std::fprintf(stderr, "kernel_chain_bench: expected THREADS:GRID[,GRID...], got '%s'\n", t.c_str());
      return 2;
    }
    specs.push_back(s);
  }
  float* buf[2] = {nullptr, nullptr};
  cudaStream_t stream = nullptr;
  if (!ok(cudaMalloc(&buf[0], kBufferFloats * sizeof(float)), "cudaMalloc") ||
      !ok(cudaMalloc(&buf[1], kBufferFloats * sizeof(float)), "cudaMalloc") ||
      !ok(cudaMemset(buf[0], 0, kBufferFloats * sizeof(float)), "cudaMemset") ||
      !ok(cudaMemset(buf[1], 0, kBufferFloats * sizeof(float)), "cudaMemset") ||
      !ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream"))
    return 2;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%s, %d SMs; microseconds per kernel of a %d-kernel graph (median of 7 x 20 replays)\n", prop.name,
              prop.multiProcessorCount, kChain);
  std::printf("%-36s %12s %12s %14s\n", "threads:grids", "PDL + wait", "plain", "PDL, no wait");
  for (const Spec& s : specs) {
    const double pdl = time_chain(s, kPdlWait, buf, stream), plain = time_chain(s, kPlain, buf, stream),
                 none = time_chain(s, kNoWait, buf, stream);
    if (pdl < 0 || plain < 0 || none < 0) return 2;
    std::printf("%-36s %12.3f %12.3f %14.3f\n", s.text.c_str(), pdl, plain, none);
  }
  return 0;
}
