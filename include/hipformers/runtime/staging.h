// Host memory the device copies to and from in stream order, so the host
// does not stall on a transfer: a decode step's inputs go up, and its greedy
// ids come back, while the device still runs earlier work
// (generation/engine.h). Page-locked on a GPU (the copy engine reads and
// writes it directly, after the work queued before it); plain memory on the
// CPU, where the copies happen at once.
//
// Ownership rule: the host may write data() for an upload, or read it after
// a download, only once wait() has returned for the transfers queued
// through this buffer before.
#pragma once

#include <cstddef>
#include <memory>

#include "hipformers/runtime/device.h"

namespace hipformers {

class HostStaging {
 public:
  // Error(kOutOfMemory) when the page-locked allocation fails.
  HostStaging(const Device& device, std::size_t bytes);
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  std::size_t size() const;
  void* data();
  const void* data() const;
  // Queues a copy of the first n bytes to device memory `dst` (after the
  // work already queued on the device's stream).
  void upload(void* dst, std::size_t n);
  // Queues a copy of n bytes of device memory `src` into the buffer.
  void download(const void* src, std::size_t n);
  // Blocks until every transfer queued through this buffer has finished.
  void wait() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hipformers
