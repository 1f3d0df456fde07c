// The flagged exchange between the ops of one persistent kernel: an output
// value goes out as one 32-bit word, its bf16 bits in the low half and a
// 16-bit tag of (step, op) in the high half. A 32-bit store is seen whole or
// not at all, so the next op's blocks poll their input words until every tag
// is the one they need: one round trip through L2 replaces a grid-wide
// counter's (the writer's release fence and add, the reader's poll, then
// its load). Used by the persistent decode step (decode_step_sm90_gpu.cu)
// and its prototype (bench/decode_stream_proto.cu).
//
// CUDA only (PTX relaxed loads and stores at GPU scope): include it from
// files built for CUDA alone.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace hipformers::kernels::gpu {

// The tag of op k of step `step` (ops numbered 0 .. n_ops - 1 a step):
// never 0, so zero-filled buffers hold no valid word, and consecutive ops'
// tags differ.
__device__ __forceinline__ uint32_t flag_tag(unsigned step, int n_ops, int k) {
  return (step * static_cast<unsigned>(n_ops) + static_cast<unsigned>(k)) % 65535u + 1u;
}

// v rounded to bf16 (to nearest even), stored with `tag`.
__device__ __forceinline__ void store_flagged(uint32_t* p, float v, uint32_t tag) {
  const uint32_t word = (tag << 16) | __bfloat16_as_ushort(__float2bfloat16(v));
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(word) : "memory");
}

// Four words (16-byte aligned); each is single-copy atomic, the four may be
// of different times: check every tag.
__device__ __forceinline__ uint4 load_relaxed4(const uint32_t* p) {
  uint4 v;
  asm volatile("ld.relaxed.gpu.global.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

__device__ __forceinline__ uint32_t load_relaxed1(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ bool tagged(const uint4& w, uint32_t tag) {
  return (w.x >> 16) == tag && (w.y >> 16) == tag && (w.z >> 16) == tag && (w.w >> 16) == tag;
}
__device__ __forceinline__ bool tagged(uint32_t w, uint32_t tag) { return (w >> 16) == tag; }

// One word or a vector of four, by the type of w.
__device__ __forceinline__ void load_relaxed(const uint32_t* p, uint4& w) { w = load_relaxed4(p); }
__device__ __forceinline__ void load_relaxed(const uint32_t* p, uint32_t& w) { w = load_relaxed1(p); }

// Four values (their bf16 bits, two a 32-bit word) from one word vector.
__device__ __forceinline__ uint2 pack_flagged4(const uint4& w) {
  return make_uint2((w.x & 0xffffu) | (w.y << 16), (w.z & 0xffffu) | (w.w << 16));
}

// Eight values from two word vectors.
__device__ __forceinline__ uint4 pack_flagged8(const uint4& a, const uint4& b) {
  const uint2 lo = pack_flagged4(a), hi = pack_flagged4(b);
  return make_uint4(lo.x, lo.y, hi.x, hi.y);
}

// Re-reads the word or words at p (already loaded once into w: a uint32_t
// or a uint4) until every tag is `tag`, pausing sleep_ns between reads: 132
// blocks polling the same lines would crowd the L2 slices the writers store
// to. `between` runs after each re-read (the runtime's hang check; nothing
// in the prototype).
template <typename Word, typename Between>
__device__ __forceinline__ void poll_tagged(const uint32_t* p, Word& w, uint32_t tag, Between between,
                                            unsigned sleep_ns = 32) {
  while (!tagged(w, tag)) {
    if (sleep_ns) __nanosleep(sleep_ns);
    load_relaxed(p, w);
    between();
  }
}

// The value of one word.
__device__ __forceinline__ float flagged_value(uint32_t w) {
  return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(w & 0xffffu)));
}

}  // namespace hipformers::kernels::gpu
