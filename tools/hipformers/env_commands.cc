// `hipformers env`: the guide's first check (torch.cuda.is_available(),
// torch.version.hip / .cuda, device count and names) in one command.
// `hipformers devices`: a table like nvidia-smi -L / rocm-smi.
#include <cstdio>
#include <iostream>
#include <thread>

#include "commands.h"
#include "hipformers/core/fp8.h"
#include "hipformers/core/json.h"
#include "hipformers/core/version.h"
#include "hipformers/runtime/device.h"

namespace hipformers::cli {
namespace {

std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

Json device_json(const GpuDeviceInfo& d) {
  return Json{{"index", d.logical_index},
              {"device", "cuda:" + std::to_string(d.logical_index)},
              {"physical_id", d.physical_id},
              {"name", d.name},
              {"arch", d.arch},
              {"total_memory_bytes", d.total_memory},
              {"free_memory_bytes", d.free_memory},
              {"multiprocessors", d.multiprocessors},
              {"warp_size", d.warp_size},
              {"fp8_e4m3", fp8_format_name(native_fp8_e4m3_format(d.arch.c_str()))},  // the GPU's own FP8 encoding
              {"pci_bus_id", d.pci_bus_id},
              {"uuid", d.uuid}};
}

Json optional_json(const std::optional<std::string>& v) { return v ? Json(*v) : Json(nullptr); }

void run_env(bool as_json) {
  GpuStackInfo info = query_gpu_stack();
  if (as_json) {
    Json j{{"hipformers_version", HIPFORMERS_VERSION},
           {"backend", info.backend},
           {"hip_version", optional_json(info.hip_version)},
           {"cuda_version", optional_json(info.cuda_version)},
           {"runtime_version", optional_json(info.runtime_version)},
           {"driver_version", optional_json(info.driver_version)},
           {"gpu_available", info.gpu_available},
           {"device_count", info.devices.size()},
           {"devices", Json::array()},
           {"visible_devices", info.visible.description},
           {"cpu_threads", std::thread::hardware_concurrency()},
           {"problem", optional_json(info.problem)}};
    for (const auto& d : info.devices) j["devices"].push_back(device_json(d));
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "hipformers version: " << HIPFORMERS_VERSION << "\n"
            << "backend: " << info.backend << "\n"
            << "HIP version: " << info.hip_version.value_or("none") << "\n"
            << "CUDA version: " << info.cuda_version.value_or("none") << "\n"
            << "runtime version: " << info.runtime_version.value_or("none") << "\n"
            << "driver version: " << info.driver_version.value_or("none") << "\n"
            << "GPU available: " << (info.gpu_available ? "True" : "False") << "\n"
            << "device count: " << info.devices.size() << "\n";
  for (const auto& d : info.devices) {
    std::cout << "  cuda:" << d.logical_index << " (physical " << d.physical_id << "): " << d.name << ", " << d.arch
              << ", " << gib(d.total_memory) << "\n";
  }
  std::cout << "visible devices: " << info.visible.description << "\n";
  if (info.problem) std::cout << "note: " << *info.problem << "\n";
}

void run_devices(bool as_json) {
  GpuStackInfo info = query_gpu_stack();
  if (as_json) {
    Json j = Json::array();
    for (const auto& d : info.devices) j.push_back(device_json(d));
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (info.devices.empty()) {
    std::cout << "no GPU visible (" << info.problem.value_or("unknown reason") << ")\n";
    return;
  }
  std::printf("%-8s %-10s %-24s %-24s %10s %10s %5s %5s  %s\n", "DEVICE", "PHYSICAL", "NAME", "ARCH", "MEMORY", "FREE",
              "SMs", "WARP", "PCI BUS");
  for (const auto& d : info.devices) {
    std::printf("%-8s %-10s %-24s %-24s %10s %10s %5d %5d  %s\n", ("cuda:" + std::to_string(d.logical_index)).c_str(),
                d.physical_id.c_str(), d.name.c_str(), d.arch.c_str(), gib(d.total_memory).c_str(),
                gib(d.free_memory).c_str(), d.multiprocessors, d.warp_size, d.pci_bus_id.c_str());
  }
  std::printf("visible devices: %s\n", info.visible.description.c_str());
}

}  // namespace

void add_env_commands(CLI::App& app) {
  auto* env = app.add_subcommand("env", "Print the GPU stack: backend, HIP/CUDA versions, devices");
  auto env_json = std::make_shared<bool>(false);
  env->add_flag("--json", *env_json, "Print one JSON object");
  env->callback([env_json] { run_env(*env_json); });

  auto* devices = app.add_subcommand("devices", "List visible GPUs, logical index beside physical id");
  auto devices_json = std::make_shared<bool>(false);
  devices->add_flag("--json", *devices_json, "Print a JSON array");
  devices->callback([devices_json] { run_devices(*devices_json); });
}

}  // namespace hipformers::cli
