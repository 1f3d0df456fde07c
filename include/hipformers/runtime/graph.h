// Record once, replay many times: the work a callable queues on a device's
// stream is captured as a CUDA graph (a HIP graph on ROCm) and relaunched
// with one call, which removes the per-kernel launch cost that dominates a
// small-batch decode step (hundreds of small kernels).
//
// A captured callable must only enqueue work on the device's stream: no
// allocation, no host<->device copy, no synchronisation (the replay reuses
// the very same device addresses and kernel arguments; inputs change by
// writing into the buffers the graph reads). On the CPU there is nothing to
// record: the callable itself is kept and replay() runs it, so callers need
// no second code path.
#pragma once

#include <functional>
#include <memory>

#include "hipformers/runtime/device.h"

namespace hipformers {

class DeviceGraph {
 public:
  DeviceGraph();
  ~DeviceGraph();
  DeviceGraph(DeviceGraph&&) noexcept;
  DeviceGraph& operator=(DeviceGraph&&) noexcept;

  // Records what `enqueue` queues on `device` (does not run it on a GPU).
  // Error(kRuntime) naming the failure when capture is impossible, e.g. the
  // callable synchronised; the stream is left usable.
  void capture(const Device& device, std::function<void()> enqueue);
  bool captured() const;
  // Queues the recorded work on the device's stream (runs it on the CPU).
  void replay() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hipformers
