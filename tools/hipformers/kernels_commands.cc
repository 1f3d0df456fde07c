// kernels: what the kernel registry holds for each device key (cpu, cuda,
// rocm), the default per layer kind, and whether this build can run it; plus
// the attention backends each device accepts.
#include <iostream>
#include <memory>

#include "commands.h"
#include "hipformers/core/json.h"
#include "hipformers/kernels/attention_backends.h"
#include "hipformers/kernels/registry.h"

namespace hipformers::cli {
namespace {

void run_kernels(bool json) {
  if (json) {
    Json out = Json::object();
    Json reg = kernels::registry_json();
    for (std::string_view device : kernels::kDeviceKeys) {
      Json dev = reg[std::string(device)];
      dev["attention_backends"] = kernels::attention_backends(device);
      out[std::string(device)] = std::move(dev);
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  const std::string_view built = kernels::built_gpu_key();
  for (std::string_view device : kernels::kDeviceKeys) {
    const bool here = device == "cpu" || device == built;
    std::cout << device << (here ? "" : " (not in this build)") << ":\n";
    for (kernels::LayerKind layer : kernels::kLayerKinds) {
      std::cout << "  " << kernels::layer_kind_name(layer) << ":";
      const char* sep = " ";
      for (const auto& name : kernels::kernel_names(layer, device)) {
        std::cout << sep << name;
        if (kernels::default_kernel(layer, device).name == name) std::cout << " (default)";
        sep = ", ";
      }
      std::cout << "\n";
    }
    std::cout << "  attention backends:";
    const char* sep = " ";
    for (const auto& name : kernels::attention_backends(device)) {
      std::cout << sep << name;
      sep = ", ";
    }
    std::cout << "\n";
  }
}

}  // namespace

void add_kernels_commands(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("kernels", "List the registered kernels and attention backends per device");
  cmd->add_flag("--json", *json, "Print JSON: {device: {layer: {default, kernels: [...]}, attention_backends}}");
  cmd->callback([json] { run_kernels(*json); });
}

}  // namespace hipformers::cli
