// The GPU side of hipformers/runtime/staging.h, callable from plain C++.
#pragma once

#include <cstddef>

namespace hipformers::gpu {

// Page-locked host memory (Error(kOutOfMemory) on failure) and its release.
void* host_pinned_alloc(std::size_t bytes);
void host_pinned_free(void* p);
// An event of `device` without timing (cheap to record and wait for).
void* event_create(int device);
void event_destroy(void* event);
// Queues a copy on the device's stream and records `event` after it.
void copy_async_then_record(void* dst, const void* src, std::size_t n, bool to_device, int device, void* event);
void event_wait(void* event);

}  // namespace hipformers::gpu
