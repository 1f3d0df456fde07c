// The guide's first check, in C++:
//   import torch
//   print(torch.cuda.is_available())     # True on a working ROCm or CUDA install
//   print(torch.version.hip)             # e.g. "6.4.x" on ROCm, None on CUDA
//   print(torch.cuda.device_count())
//   print(torch.cuda.get_device_name(0))
#include <cstdio>

#include "hipformers/core/error.h"
#include "hipformers/runtime/device.h"

int main() {
  try {
    hipformers::GpuStackInfo gpu = hipformers::query_gpu_stack();
    std::printf("available: %s\n", gpu.gpu_available ? "True" : "False");
    std::printf("hip version: %s\n", gpu.hip_version.value_or("None").c_str());
    std::printf("cuda version: %s\n", gpu.cuda_version.value_or("None").c_str());
    std::printf("device count: %zu\n", gpu.devices.size());
    for (const auto& d : gpu.devices) std::printf("cuda:%d: %s (%s)\n", d.logical_index, d.name.c_str(), d.arch.c_str());
    // "auto" is what device_map="auto" means for one device: the first GPU, else the CPU.
    std::printf("auto -> %s\n", hipformers::resolve_device("auto").str().c_str());
  } catch (const hipformers::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
