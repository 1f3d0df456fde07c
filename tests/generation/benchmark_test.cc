// The benchmark (hipformers/generation/benchmark.h) on a tiny CPU model:
// positive, self-consistent numbers, every JSON field, errors for bad options.
#include "hipformers/generation/benchmark.h"

#include <gtest/gtest.h>

#include <cmath>

#include "hipformers/runtime/profiling.h"
#include "test_paths.h"
#include "test_util.h"

namespace hipformers {
namespace {

using testing::error_of;

BenchmarkOptions small_options() {
  BenchmarkOptions o;
  o.batch = 2;
  o.prompt_len = 8;
  o.gen_len = 4;
  o.warmup = 1;
  o.repeat = 3;
  o.copy_bytes = std::size_t{4} << 20;
  return o;
}

TEST(Benchmark, TinyModelReportIsSane) {
  const BenchmarkReport r = run_benchmark(testing::test_data("models/qwen3-tiny"), ModelLoadOptions{}, small_options());
  EXPECT_EQ(r.device, "cpu");
  EXPECT_EQ(r.dtype, "float32");
  EXPECT_EQ(r.model_type, "qwen3");
  EXPECT_TRUE(r.batched);  // sdpa: continuous batching (engine.h)
  EXPECT_EQ(r.batch, 2);
  EXPECT_GT(r.parameters, 0);
  EXPECT_GE(r.load_seconds, 0);
  for (double v : {r.prefill_ms, r.prefill_tokens_per_s, r.decode_ms, r.decode_tokens_per_s, r.ms_per_decode_step,
                   r.copy_bandwidth_bytes_per_s, r.weight_bytes, r.kv_bytes_per_decode_step,
                   r.decode_bandwidth_bytes_per_s, r.bandwidth_fraction}) {
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_GT(v, 0);
  }
  // tokens/s agree with the times: 2 x 8 prompt tokens, 2 x 3 decode steps.
  EXPECT_NEAR(r.prefill_tokens_per_s, 16 / (r.prefill_ms * 1e-3), 1e-6 * r.prefill_tokens_per_s);
  EXPECT_NEAR(r.decode_tokens_per_s, 6 / (r.decode_ms * 1e-3), 1e-6 * r.decode_tokens_per_s);
  EXPECT_NEAR(r.ms_per_decode_step, r.decode_ms / 3, 1e-9);
  // Tiny qwen3 (vocab 256, hidden 32, 2 layers, F32 on the CPU): the lm_head alone is 256 x 32 x 4 bytes.
  EXPECT_GE(r.weight_bytes, 256.0 * 32 * 4);
  // KV: 2 sequences x mean length (8 + 2) x 2 layers x 2 (k, v) x 2 heads x 16 x 4 bytes.
  EXPECT_DOUBLE_EQ(r.kv_bytes_per_decode_step, 2 * 10.0 * 2 * 2 * 2 * 16 * 4);
  EXPECT_EQ(r.memory_kind, "host_rss");
  EXPECT_GT(r.peak_memory_bytes, std::size_t{1} << 20);
}

TEST(Benchmark, JsonHasEveryField) {
  BenchmarkOptions o = small_options();
  o.batch = 1;
  o.repeat = 1;
  o.warmup = 0;
  const OrderedJson j = to_json(run_benchmark(testing::test_data("models/qwen3-tiny"), ModelLoadOptions{}, o));
  for (const char* key :
       {"hipformers_version", "date", "device", "device_name", "dtype", "model_type", "parameters",
        "attn_implementation", "batch", "prompt_len", "gen_len", "warmup", "repeat", "batched", "load_seconds",
        "prefill_ms", "prefill_tokens_per_s", "decode_ms", "decode_tokens_per_s", "ms_per_decode_step",
        "generate_tokens_per_s",
        "peak_memory_bytes", "peak_reserved_bytes", "memory_kind", "copy_bandwidth_gb_per_s",
        "weight_bytes_per_decode_step", "kv_bytes_per_decode_step", "decode_bandwidth_gb_per_s",
        "bandwidth_fraction"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["batched"], true);
  EXPECT_EQ(j["gen_len"], 4);
  EXPECT_FALSE(to_text(run_benchmark(testing::test_data("models/qwen3-tiny"), ModelLoadOptions{}, o)).empty());
}

TEST(Benchmark, BadOptionsAreErrors) {
  const auto dir = testing::test_data("models/qwen3-tiny");
  auto bad = [&](auto change, const std::string& needle) {
    BenchmarkOptions o = small_options();
    change(o);
    auto [kind, message] = error_of([&] { run_benchmark(dir, ModelLoadOptions{}, o); });
    EXPECT_EQ(kind, ErrorKind::kInvalidInput) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  };
  bad([](BenchmarkOptions& o) { o.batch = 0; }, "--batch");
  bad([](BenchmarkOptions& o) { o.prompt_len = 0; }, "--prompt-len");
  bad([](BenchmarkOptions& o) { o.gen_len = 1; }, "--gen-len");
  bad([](BenchmarkOptions& o) { o.repeat = 0; }, "--repeat");
  bad([](BenchmarkOptions& o) { o.warmup = -1; }, "--warmup");
  bad([](BenchmarkOptions& o) { o.prompt_len = 510; }, "max_position_embeddings");  // tiny model: 512 positions
  auto [kind, message] = error_of([&] { run_benchmark(dir / "missing", ModelLoadOptions{}, small_options()); });
  EXPECT_EQ(kind, ErrorKind::kNotFound) << message;
}

TEST(Profiling, CpuTimerMemoryAndBandwidth) {
  DeviceTimer timer(Device::cpu());
  timer.start();
  EXPECT_GE(timer.stop_ms(), 0);
  const MemoryStats m = memory_stats(Device::cpu());
  EXPECT_TRUE(m.host_rss);
  EXPECT_GE(m.peak_bytes, m.current_bytes);
  EXPECT_GT(m.current_bytes, 0u);
  EXPECT_GT(measure_copy_bandwidth(Device::cpu(), std::size_t{1} << 20, 3), 0);
  EXPECT_EQ(error_of([] { measure_copy_bandwidth(Device::cpu(), 0); }).first, ErrorKind::kInvalidInput);
  EXPECT_EQ(error_of([] { measure_copy_bandwidth(Device::cpu(), 64, 0); }).first, ErrorKind::kInvalidInput);
}

}  // namespace
}  // namespace hipformers
