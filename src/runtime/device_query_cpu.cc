// CPU-only builds: no GPU runtime to ask. The visible-device variables are
// still validated, so a malformed list is reported the same way everywhere.
#include "hipformers/runtime/device.h"

namespace hipformers {

GpuStackInfo query_gpu_stack() {
  GpuStackInfo info;
  info.backend = "cpu";
  info.visible = resolve_visible_devices(GpuPlatform::kCuda, VisibleDevicesEnv::from_process(), -1);
  info.problem = "this hipformers was built without a GPU backend (preset 'cpu')";
  return info;
}

int gpu_count() { return 0; }

bool built_with_gpu() { return false; }

}  // namespace hipformers
