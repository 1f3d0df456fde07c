// Host side of the step trace (gpu/step_trace.h; built with
// HIPFORMERS_STEP_TRACE=ON only).
#include "hipformers/kernels/step_trace.h"

#include <cstdio>
#include <mutex>
#include <vector>

#include "hipformers/core/error.h"

#include "gpu/step_trace.h"

namespace hipformers::kernels {
namespace gpu {
namespace {
std::vector<void (*)(const StepTraceBuffer&)>& setters() {
  static std::vector<void (*)(const StepTraceBuffer&)> all;
  return all;
}
StepTraceBuffer armed;
}  // namespace

void step_trace_register(void (*set)(const StepTraceBuffer&)) { setters().push_back(set); }
}  // namespace gpu

namespace {
void trace_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw_error(ErrorKind::kRuntime, std::string("step trace: ") + what + ": " + cudaGetErrorString(e));
}
void set_all(const gpu::StepTraceBuffer& b) {
  for (auto* set : gpu::setters()) set(b);
  trace_check(cudaGetLastError(), "cudaMemcpyToSymbol");
}
}  // namespace

constexpr std::size_t kTraceWords = std::size_t{gpu::kTraceKernels} * gpu::kTraceBlocks * 4 * 4;

void step_trace_arm(int device) {
  trace_check(cudaSetDevice(device), "cudaSetDevice");
  gpu::StepTraceBuffer b;
  trace_check(cudaMalloc(&b.records, kTraceWords * sizeof(unsigned long long)), "cudaMalloc");
  trace_check(cudaMemset(b.records, 0, kTraceWords * sizeof(unsigned long long)), "cudaMemset");
  trace_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  gpu::armed = b;
  set_all(b);
}

std::size_t step_trace_write(int device, const std::string& path) {
  trace_check(cudaSetDevice(device), "cudaSetDevice");
  trace_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  gpu::StepTraceBuffer b = gpu::armed;
  if (!b.records) return 0;
  set_all(gpu::StepTraceBuffer{});
  std::vector<unsigned long long> r(kTraceWords);
  trace_check(cudaMemcpy(r.data(), b.records, r.size() * sizeof(r[0]), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(b.records);
  gpu::armed = {};
  const std::size_t n = kTraceWords / 4;
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw_error(ErrorKind::kRuntime, "step trace: cannot write " + path);
  std::fprintf(f, "gridid,globaltimer_ns,clock,event,sm,block,grid\n");
  std::size_t written = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned long long* x = &r[i * 4];
    if (x[0] == 0 && x[1] == 0) continue;  // an empty slot
    ++written;
    std::fprintf(f, "%llu,%llu,%llu,%llu,%llu,%llu,%llu\n", x[0], x[1], x[2], x[3] & 0xf, (x[3] >> 4) & 0xfff,
                 (x[3] >> 16) & 0xffffff, x[3] >> 40);
  }
  std::fclose(f);
  return written;
}

}  // namespace hipformers::kernels
