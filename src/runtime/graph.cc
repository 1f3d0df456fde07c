// DeviceGraph: the CPU keeps the callable; GPU builds record a graph
// (gpu/graph_gpu.cu).
#include "hipformers/runtime/graph.h"

#include "hipformers/core/error.h"

#if defined(HIPFORMERS_WITH_CUDA) || defined(HIPFORMERS_WITH_HIP)
#include "gpu/graph_gpu.h"
#define HF_GRAPH_GPU 1
#endif

namespace hipformers {

struct DeviceGraph::Impl {
  Device device;
  std::function<void()> cpu_work;
#ifdef HF_GRAPH_GPU
  gpu::Graph gpu_graph;
#endif
};

DeviceGraph::DeviceGraph() = default;
DeviceGraph::~DeviceGraph() = default;
DeviceGraph::DeviceGraph(DeviceGraph&&) noexcept = default;
DeviceGraph& DeviceGraph::operator=(DeviceGraph&&) noexcept = default;

void DeviceGraph::capture(const Device& device, std::function<void()> enqueue) {
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  if (device.is_cpu()) {
    impl->cpu_work = std::move(enqueue);
  } else {
#ifdef HF_GRAPH_GPU
    impl->gpu_graph.capture(device.index, enqueue);
#else
    throw_error(ErrorKind::kUnsupported, device.str() + ": this build has no GPU backend (use --device cpu)");
#endif
  }
  impl_ = std::move(impl);
}

bool DeviceGraph::captured() const { return impl_ != nullptr; }

void DeviceGraph::replay() const {
  if (!impl_) throw_error(ErrorKind::kRuntime, "DeviceGraph::replay: nothing was captured");
  if (impl_->device.is_cpu()) return impl_->cpu_work();
#ifdef HF_GRAPH_GPU
  impl_->gpu_graph.replay();
#endif
}

}  // namespace hipformers
