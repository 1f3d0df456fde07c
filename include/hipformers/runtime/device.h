// Devices as the user names them: "cpu", "cuda", "cuda:N", "auto" (and a bare
// "N", as Transformers' device_map accepts). On ROCm the GPU is still called
// "cuda", as in PyTorch, so scripts move between vendors unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hipformers/runtime/visible_devices.h"

namespace hipformers {

enum class DeviceType { kCpu, kGpu };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;  // logical GPU index; 0 for the CPU

  static Device cpu() { return {DeviceType::kCpu, 0}; }
  static Device gpu(int index) { return {DeviceType::kGpu, index}; }
  bool is_cpu() const { return type == DeviceType::kCpu; }
  bool is_gpu() const { return type == DeviceType::kGpu; }
  std::string str() const;  // "cpu" or "cuda:N"
  bool operator==(const Device&) const = default;
};

// A parsed device string, before it is checked against the machine.
struct DeviceRequest {
  enum class Kind { kCpu, kGpu, kAuto } kind = Kind::kAuto;
  std::optional<int> index;  // only for kGpu; nullopt = "cuda" (the current device, 0)
};

// Parses a device string; throws Error(kInvalidInput) listing the accepted forms.
DeviceRequest parse_device_string(std::string_view text);

// Resolves a request against `gpu_count` visible GPUs: "auto" is cuda:0 when a
// GPU is visible, else cpu; "cuda" is cuda:0. Throws Error(kInvalidInput) when
// the GPU does not exist, saying how many are visible and, if the build has no
// GPU backend, that it must be rebuilt with one.
Device resolve_device(const DeviceRequest& request, int gpu_count, bool built_with_gpu);

// What the GPU stack looks like; what `hipformers env` prints.
struct GpuDeviceInfo {
  int logical_index = 0;
  std::string physical_id;  // per the *_VISIBLE_DEVICES mapping
  std::string name;         // "NVIDIA H200", "AMD Instinct MI300X"
  std::string arch;         // "sm_90"; on ROCm the full gcnArchName "gfx942:sramecc+:xnack-"
  std::uint64_t total_memory = 0;
  std::uint64_t free_memory = 0;
  int multiprocessors = 0;  // SMs / CUs
  int warp_size = 0;        // 32 on NVIDIA and RDNA, 64 on CDNA
  std::string pci_bus_id;   // "0000:1b:00.0", to match nvidia-smi / rocm-smi
  std::string uuid;         // "GPU-..." where the runtime reports one
};

struct GpuStackInfo {
  std::string backend;                       // "cpu", "cuda" or "hip": what this build targets
  std::optional<std::string> cuda_version;   // like torch.version.cuda: the CUDA this build was compiled with
  std::optional<std::string> hip_version;    // like torch.version.hip
  std::optional<std::string> runtime_version;  // the runtime library actually loaded
  std::optional<std::string> driver_version;   // the version the driver supports
  bool gpu_available = false;
  std::vector<GpuDeviceInfo> devices;
  VisibleDeviceMapping visible;              // how *_VISIBLE_DEVICES applied
  std::optional<std::string> problem;        // why no GPU is available, if none is
};

// Queries the runtime (cudart or HIP) for every visible device. Validates the
// *_VISIBLE_DEVICES variables first (throws on a malformed list). On a CPU-only
// build returns backend "cpu" and no devices.
GpuStackInfo query_gpu_stack();

// Number of visible GPUs (0 on a CPU build or without a driver). Cheap after the first call.
int gpu_count();

// Parses and resolves a device string against this machine in one step.
Device resolve_device(std::string_view text);

// True if this binary was compiled with a GPU backend (CUDA or HIP).
bool built_with_gpu();

}  // namespace hipformers
