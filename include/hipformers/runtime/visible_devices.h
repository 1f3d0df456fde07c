// Which physical GPUs a process sees, and in what order: the rules of
// CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES as one
// pure function, so they can be unit-tested without a GPU.
//
//   CUDA: CUDA_VISIBLE_DEVICES lists physical indices (or GPU-/MIG- UUIDs); the
//         logical device i is the i-th entry.
//   ROCm: ROCR_VISIBLE_DEVICES filters the physical devices first (ROCr level);
//         HIP_VISIBLE_DEVICES (or, if unset, CUDA_VISIBLE_DEVICES) then indexes
//         into what ROCR left, in the order given. HIP_VISIBLE_DEVICES=0,2 makes
//         cuda:0 physical 0 and cuda:1 physical 2.
// The drivers apply these variables themselves and silently stop at the first
// bad entry; hipformers checks them first so that a malformed, duplicate or
// out-of-range list is a clear error naming the variable instead.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hipformers {

enum class GpuPlatform { kCuda, kRocm };

struct VisibleDevicesEnv {
  std::optional<std::string> cuda_visible_devices;
  std::optional<std::string> hip_visible_devices;
  std::optional<std::string> rocr_visible_devices;

  // Reads the three variables from the process environment.
  static VisibleDevicesEnv from_process();
};

struct VisibleDeviceMapping {
  // physical_ids[logical] = the physical device's id as the variable named it:
  // a decimal index ("2") or a UUID ("GPU-8a1b...").
  std::vector<std::string> physical_ids;
  // True if any variable restricted or reordered the devices.
  bool restricted = false;
  // Human-readable account of what applied, e.g.
  // "ROCR_VISIBLE_DEVICES=1,2,3 then HIP_VISIBLE_DEVICES=2,0".
  std::string description;
};

// Resolves the logical -> physical mapping. `physical_count` is the number of
// physical GPUs if known (-1 if not: then indices are only range-checked
// against the lists themselves). `physical_uuids`, if non-empty, lets UUID
// entries be checked. Throws Error(kInvalidInput) naming the variable on a
// malformed entry, a duplicate, or an index out of range.
VisibleDeviceMapping resolve_visible_devices(GpuPlatform platform, const VisibleDevicesEnv& env,
                                             int physical_count,
                                             const std::vector<std::string>& physical_uuids = {});

}  // namespace hipformers
