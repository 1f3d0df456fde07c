// The inference benchmark behind `hipformers bench`: seeded random prompts,
// warm-up runs, then timed repeats of prefill and of greedy decode, each timed
// on the device (GPU events; the host clock after the work on the CPU).
// Medians over the repeats are reported with the peak memory and how close
// decode comes to the copy-bandwidth ceiling:
//
//   bytes a decode step must read = weights once + every sequence's KV cache
//   bandwidth fraction = (bytes per step / step time) / measured copy bandwidth
//
// gen_len counts new tokens per sequence as Transformers' max_new_tokens does:
// the first comes from prefill, the other gen_len - 1 from decode steps.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "hipformers/core/json.h"
#include "hipformers/models/causal_lm.h"

namespace hipformers {

struct BenchmarkOptions {
  int64_t batch = 1;
  int64_t prompt_len = 128;
  int64_t gen_len = 128;  // >= 2
  int64_t warmup = 1;     // >= 0
  int64_t repeat = 3;     // >= 1
  uint64_t seed = 0;
  // Size of the buffer copied to measure the bandwidth ceiling; 0 = 1 GiB on a
  // GPU, 256 MiB on the CPU.
  std::size_t copy_bytes = 0;
};

struct BenchmarkReport {
  // What ran.
  std::string device, device_name, dtype, model_type, attn_implementation;
  int64_t batch = 0, prompt_len = 0, gen_len = 0, warmup = 0, repeat = 0;
  int64_t parameters = 0;
  bool batched = false;  // true: continuous batching (engine.h); false: eager attention, one sequence after another
  double load_seconds = 0;
  // Medians over the repeats.
  double prefill_ms = 0, prefill_tokens_per_s = 0;
  double decode_ms = 0, decode_tokens_per_s = 0, ms_per_decode_step = 0;
  double generate_tokens_per_s = 0;  // batch * gen_len / (prefill + decode): the end-to-end rate
  // Memory: allocator counters on a GPU (since the model started loading), RSS on the CPU.
  std::size_t peak_memory_bytes = 0, peak_reserved_bytes = 0;
  std::string memory_kind;  // "gpu_allocator" or "host_rss"
  // Bandwidth ceiling.
  double copy_bandwidth_bytes_per_s = 0;
  double weight_bytes = 0;                // read once per decode step
  double kv_bytes_per_decode_step = 0;    // mean over the steps, all sequences
  double decode_bandwidth_bytes_per_s = 0;
  double bandwidth_fraction = 0;
};

// Error(kInvalidInput) naming the field for a value out of range.
void validate(const BenchmarkOptions& options);

// Benchmarks a loaded model. The copy bandwidth is measured first.
BenchmarkReport run_benchmark(const CausalLM& model, const BenchmarkOptions& options);

// Validates, measures the copy bandwidth, resets the peak-memory counters,
// loads `dir` with `load` (timed) and benchmarks it, so the peak includes the weights.
BenchmarkReport run_benchmark(const std::filesystem::path& dir, const ModelLoadOptions& load,
                              const BenchmarkOptions& options);

// Every field, plus hipformers' version and the UTC date.
OrderedJson to_json(const BenchmarkReport& report);
// A few human-readable lines.
std::string to_text(const BenchmarkReport& report);

}  // namespace hipformers
