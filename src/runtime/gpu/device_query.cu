// GPU stack discovery for `hipformers env` / `devices`, shared by CUDA and HIP.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

#include "gpu_runtime.h"
#include "hipformers/core/error.h"
#include "hipformers/runtime/device.h"

namespace hipformers {
namespace {

std::string error_text(gpuError_t err) {
  return std::string(gpuGetErrorName(err)) + ": " + gpuGetErrorString(err);
}

// "13.0" from 13000 (CUDA encodes 1000*major + 10*minor). HIP encodes
// major*10^7 + minor*10^5 + patch.
std::string version_string(int v) {
#if defined(HIPFORMERS_WITH_HIP)
  return std::to_string(v / 10000000) + "." + std::to_string((v / 100000) % 100) + "." + std::to_string(v % 100000);
#else
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
#endif
}

#if defined(HIPFORMERS_WITH_CUDA)
// The physical GPUs as NVML sees them (NVML ignores CUDA_VISIBLE_DEVICES), so a
// list can be range-checked. Loaded at run time: NVML ships with the driver.
struct PhysicalGpus {
  int count = -1;
  std::vector<std::string> uuids;
};

PhysicalGpus physical_gpus() {
  PhysicalGpus out;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return out;
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned*);
  using HandleFn = int (*)(unsigned, void**);
  using UuidFn = int (*)(void*, char*, unsigned);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<HandleFn>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto uuid = reinterpret_cast<UuidFn>(dlsym(lib, "nvmlDeviceGetUUID"));
  unsigned n = 0;
  if (init && count && init() == 0 && count(&n) == 0) {
    out.count = static_cast<int>(n);
    for (unsigned i = 0; i < n && handle && uuid; ++i) {
      void* h = nullptr;
      char buf[96] = {0};
      if (handle(i, &h) == 0 && uuid(h, buf, sizeof(buf)) == 0) out.uuids.emplace_back(buf);
    }
  }
  // NVML stays loaded for the process; unloading it races with its threads.
  return out;
}

std::string format_uuid(const cudaUUID_t& u) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return buf;
}
#else
struct PhysicalGpus {
  int count = -1;
  std::vector<std::string> uuids;
};

// ROCr enumerates GPUs in KFD topology order: nodes with SIMDs are GPUs.
PhysicalGpus physical_gpus() {
  PhysicalGpus out;
  std::error_code ec;
  std::filesystem::path nodes = "/sys/class/kfd/kfd/topology/nodes";
  if (!std::filesystem::is_directory(nodes, ec)) return out;
  std::vector<std::pair<int, std::string>> gpus;  // node id, unique id
  for (const auto& entry : std::filesystem::directory_iterator(nodes, ec)) {
    std::ifstream props(entry.path() / "properties");
    std::string key;
    long long value = 0, simds = 0, unique = 0;
    while (props >> key >> value) {
      if (key == "simd_count") simds = value;
      if (key == "unique_id") unique = value;
    }
    if (simds > 0) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "GPU-%016llx", static_cast<unsigned long long>(unique));
      gpus.emplace_back(std::stoi(entry.path().filename().string()), buf);
    }
  }
  std::sort(gpus.begin(), gpus.end());
  out.count = static_cast<int>(gpus.size());
  for (auto& g : gpus) out.uuids.push_back(g.second);
  return out;
}
#endif

GpuStackInfo query_once() {
  GpuStackInfo info;
  info.backend = HF_GPU_PLATFORM_NAME;
#if defined(HIPFORMERS_WITH_HIP)
  info.hip_version = std::to_string(HIP_VERSION_MAJOR) + "." + std::to_string(HIP_VERSION_MINOR) + "." +
                     std::to_string(HIP_VERSION_PATCH);
  const GpuPlatform platform = GpuPlatform::kRocm;
#else
  info.cuda_version = std::to_string(CUDART_VERSION / 1000) + "." + std::to_string((CUDART_VERSION % 1000) / 10);
  const GpuPlatform platform = GpuPlatform::kCuda;
#endif
  // Validate the visible-device variables before the runtime silently applies them.
  PhysicalGpus physical = physical_gpus();
  info.visible = resolve_visible_devices(platform, VisibleDevicesEnv::from_process(), physical.count, physical.uuids);

  int v = 0;
  if (gpuRuntimeGetVersion(&v) == gpuSuccess) info.runtime_version = version_string(v);
  if (gpuDriverGetVersion(&v) == gpuSuccess && v > 0) info.driver_version = version_string(v);

  int count = 0;
  gpuError_t err = gpuGetDeviceCount(&count);
  if (err != gpuSuccess) {
    info.problem = error_text(err);
    (void)gpuGetLastError();  // clear the sticky-free error so later calls start clean
    return info;
  }
  if (info.visible.restricted && count != static_cast<int>(info.visible.physical_ids.size())) {
    // The driver stopped at an entry we could not check (e.g. no NVML).
    throw_invalid(info.visible.description + ": the driver accepted " + std::to_string(count) + " of the " +
                  std::to_string(info.visible.physical_ids.size()) + " listed devices; check the list against `nvidia-smi -L` / `rocm-smi`");
  }
  for (int i = 0; i < count; ++i) {
    gpuDeviceProp_t prop{};
    err = gpuGetDeviceProperties(&prop, i);
    if (err != gpuSuccess) {
      info.problem = "device " + std::to_string(i) + ": " + error_text(err);
      continue;
    }
    GpuDeviceInfo d;
    d.logical_index = i;
    d.physical_id = info.visible.restricted ? info.visible.physical_ids[i] : std::to_string(i);
    d.name = prop.name;
#if defined(HIPFORMERS_WITH_HIP)
    d.arch = prop.gcnArchName;
#else
    d.arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
    d.uuid = format_uuid(prop.uuid);
#endif
    d.total_memory = prop.totalGlobalMem;
    d.multiprocessors = prop.multiProcessorCount;
    d.warp_size = prop.warpSize;
    char bus[32] = {0};
    if (gpuDeviceGetPCIBusId(bus, sizeof(bus), i) == gpuSuccess) d.pci_bus_id = bus;
    size_t free_bytes = 0, total_bytes = 0;
    if (gpuSetDevice(i) == gpuSuccess && gpuMemGetInfo(&free_bytes, &total_bytes) == gpuSuccess) {
      d.free_memory = free_bytes;
    } else {
      (void)gpuGetLastError();
    }
    info.devices.push_back(std::move(d));
  }
  if (count > 0) (void)gpuSetDevice(0);
  info.gpu_available = !info.devices.empty();
  if (count == 0 && !info.problem) info.problem = "the runtime reports no GPU";
  return info;
}

}  // namespace

GpuStackInfo query_gpu_stack() { return query_once(); }

int gpu_count() {
  static std::once_flag once;
  static int count = 0;
  std::call_once(once, [] {
    // Validates *_VISIBLE_DEVICES too (throws on a bad list).
    count = static_cast<int>(query_once().devices.size());
  });
  return count;
}

bool built_with_gpu() { return true; }

}  // namespace hipformers
