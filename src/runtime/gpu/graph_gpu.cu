// Stream capture into a graph on the device's one stream. Capture uses the
// thread-local mode: anything this thread does that would break a graph (a
// synchronous copy, a sync) makes capture fail, which is reported, never
// half-recorded. Kernels other threads queue on the same stream meanwhile
// would be recorded too: one capturing user per device at a time.
#include <string>
#include <utility>

#include "gpu_context.h"
#include "graph_gpu.h"
#include "hipformers/core/error.h"

#if defined(HIPFORMERS_WITH_HIP)
using gpuGraph_t = hipGraph_t;
using gpuGraphExec_t = hipGraphExec_t;
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define gpuGraphInstantiateWithFlags hipGraphInstantiateWithFlags
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphExecDestroy hipGraphExecDestroy
#else
using gpuGraph_t = cudaGraph_t;
using gpuGraphExec_t = cudaGraphExec_t;
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define gpuGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphExecDestroy cudaGraphExecDestroy
#endif

namespace hipformers::gpu {

Graph::~Graph() {
  if (exec_) (void)gpuGraphExecDestroy(static_cast<gpuGraphExec_t>(exec_));
  if (graph_) (void)gpuGraphDestroy(static_cast<gpuGraph_t>(graph_));
}

void Graph::swap(Graph& other) noexcept {
  std::swap(device_, other.device_);
  std::swap(graph_, other.graph_);
  std::swap(exec_, other.exec_);
}

void Graph::capture(int device, const std::function<void()>& enqueue) {
  gpuStream_t stream = stream_for(device);
  check(gpuStreamBeginCapture(stream, gpuStreamCaptureModeThreadLocal), "gpuStreamBeginCapture");
  gpuGraph_t graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    (void)gpuStreamEndCapture(stream, &graph);  // leave the stream out of capture mode
    if (graph) (void)gpuGraphDestroy(graph);
    (void)gpuGetLastError();
    throw;
  }
  const gpuError_t ended = gpuStreamEndCapture(stream, &graph);
  if (ended != gpuSuccess) {
    if (graph) (void)gpuGraphDestroy(graph);
    (void)gpuGetLastError();
    check(ended, "graph capture (the captured work allocated, copied from the host or synchronised)");
  }
  gpuGraphExec_t exec = nullptr;
  const gpuError_t made = gpuGraphInstantiateWithFlags(&exec, graph, 0);
  if (made != gpuSuccess) {
    (void)gpuGraphDestroy(graph);
    check(made, "gpuGraphInstantiate");
  }
  Graph fresh;
  fresh.device_ = device;
  fresh.graph_ = graph;
  fresh.exec_ = exec;
  swap(fresh);
}

void Graph::replay() const {
  if (!exec_) throw_error(ErrorKind::kRuntime, "graph replay before capture");
  check(gpuGraphLaunch(static_cast<gpuGraphExec_t>(exec_), stream_for(device_)), "gpuGraphLaunch");
}

}  // namespace hipformers::gpu
