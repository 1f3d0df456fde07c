// sm_90 shared-memory pipelines: mbarriers and 1-D bulk copies
// (cp.async.bulk, the copy engine behind TMA) from global into shared
// memory, plus the acquire load a grid-wide wait spins on.
//
// CUDA sm_90+ only: include it from files built for CUDA alone (the
// hf_kernels_sm90a object library), whose callers keep a portable path.
//
// A stage's mbarrier counts one arrival (expect_tx, by the thread that
// issues the copy) plus the copy's bytes; it completes a phase when both
// are in. Waiters pass the parity of the phase they wait for: use n of a
// stage waits for parity n & 1.
#pragma once

#include <cstdint>

namespace hipformers::kernels::gpu {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(arrivals) : "memory");
}

// Makes the initialised barriers visible to the copy engine.
__device__ __forceinline__ void mbarrier_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// Orders this thread's generic-proxy writes to shared memory before later
// async-proxy accesses (a bulk copy refilling the same bytes).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// One arrival that also announces `bytes` of copies completing on `bar`.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
}

// `count` arrivals at once (one thread speaking for several).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(count) : "memory");
}

// Whether the phase of `parity` has completed; may suspend the thread for a
// while (hardware-defined) before it says no.
__device__ __forceinline__ bool mbarrier_try_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(done)
      : "r"(smem_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  while (!mbarrier_try_wait(bar, parity)) {
  }
}

// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global
// `src` to shared `dst`, completing on `bar`.
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_address(dst)),
      "l"(src), "r"(bytes), "r"(smem_address(bar))
      : "memory");
}

// An L2 policy for data read once (streamed weights): its lines are the
// first evicted, so a stream through L2 does not push out the small data
// every block re-reads (counters, the residual stream, the step's outputs).
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// bulk_copy_to_shared with an L2 cache policy (l2_evict_first_policy).
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                                    uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem_address(dst)),
      "l"(src), "r"(bytes), "r"(smem_address(bar)), "l"(policy)
      : "memory");
}

// Asks for `bytes` (a multiple of 16, 16-byte aligned) of global memory to
// be brought into L2, with nothing waiting on it: a later copy of them then
// finds them there instead of queueing at the memory controllers.
__device__ __forceinline__ void prefetch_l2(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

// A load that orders every later load of this thread after it (acquire, at
// GPU scope): what a grid-wide wait spins on.
__device__ __forceinline__ unsigned load_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

}  // namespace hipformers::kernels::gpu
