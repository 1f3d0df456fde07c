#include "hipformers/generation/benchmark.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#include "hipformers/core/dtype.h"
#include "hipformers/core/error.h"
#include "hipformers/core/version.h"
#include "hipformers/generation/engine.h"
#include "hipformers/runtime/profiling.h"

namespace hipformers {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string device_name(const Device& device) {
  if (device.is_gpu()) {
    for (const GpuDeviceInfo& d : query_gpu_stack().devices)
      if (d.logical_index == device.index) return d.name;
    return device.str();
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "cpu";
}

// Parameters of the weights one token's forward pass reads, in elements:
// every layer, the final norm, the lm_head and the one embedding row.
struct WeightCount {
  int64_t total = 0;     // every parameter (the embedding table counted once when tied)
  int64_t per_step = 0;  // what a decode step reads for one token
};

WeightCount count_weights(const ModelConfig& c) {
  const int64_t H = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  int64_t layer = H * q + 2 * H * kv + q * H + 3 * H * c.intermediate_size + 2 * H;
  if (c.architecture == Architecture::kQwen3) layer += 2 * c.head_dim;  // q_norm, k_norm
  if (c.attention_bias) layer += q + 2 * kv;
  if (c.attention_output_bias) layer += H;
  if (c.mlp_bias) layer += 2 * c.intermediate_size + H;
  const int64_t body = c.num_hidden_layers * layer + H;
  const int64_t table = c.vocab_size * H;
  return {body + table + (c.tie_word_embeddings ? 0 : table), body + table + H};
}

std::string utc_now_string() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int32_t argmax(const Tensor& logits) {
  const float* p = logits.data<float>();
  const int64_t n = logits.numel();
  return static_cast<int32_t>(std::max_element(p, p + n) - p);
}

struct RunTimes {
  double prefill_ms = 0, decode_ms = 0;
};

// The reference path (eager attention): one prefill + decode of every
// sequence, one after another over contiguous caches allocated before the
// clock starts.
RunTimes run_sequential(const CausalLM& model, const std::vector<std::vector<int32_t>>& prompts, int64_t gen_len,
                        DeviceTimer& timer) {
  const auto batch = prompts.size();
  const int64_t capacity = static_cast<int64_t>(prompts[0].size()) + gen_len;
  std::vector<KVCache> caches;
  caches.reserve(batch);
  for (std::size_t s = 0; s < batch; ++s) caches.push_back(model.new_cache(capacity));
  std::vector<int32_t> next(batch);
  synchronize(model.device());

  RunTimes t;
  timer.start();
  for (std::size_t s = 0; s < batch; ++s) next[s] = argmax(model.forward(prompts[s], caches[s], false));
  t.prefill_ms = timer.stop_ms();

  timer.start();
  for (int64_t step = 1; step < gen_len; ++step)
    for (std::size_t s = 0; s < batch; ++s) {
      const int32_t id = next[s];
      next[s] = argmax(model.forward(std::span<const int32_t>(&id, 1), caches[s], false));
    }
  t.decode_ms = timer.stop_ms();
  return t;
}

// The batched path: every prompt joins one engine (continuous batching over
// the paged cache, decode steps replayed as graphs); prefill lasts until every
// sequence has its first token, decode until every one has gen_len. The
// engine, its cache and its graphs outlive the runs, as a server's would.
RunTimes run_batched(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int64_t gen_len,
                     DeviceTimer& timer, const Device& device) {
  std::vector<int64_t> generated(prompts.size(), 0);
  int64_t first = -1;
  for (const auto& p : prompts) {
    const int64_t id = engine.add(p, gen_len);
    if (first < 0) first = id;
  }
  synchronize(device);
  std::size_t started = 0;
  auto advance = [&] {
    const std::vector<Engine::StepResult> ready = engine.step(true);
    const std::vector<int32_t> ids = engine.argmax_ids();
    for (const Engine::StepResult& r : ready) {
      int64_t& n = generated[static_cast<std::size_t>(r.sequence - first)];
      if (n++ == 0) ++started;
      if (n == gen_len) engine.finish(r.sequence);
      else engine.append(r.sequence, ids[static_cast<std::size_t>(r.row)]);
    }
  };
  RunTimes t;
  timer.start();
  while (started < prompts.size()) advance();
  t.prefill_ms = timer.stop_ms();
  timer.start();
  while (engine.has_work()) advance();
  t.decode_ms = timer.stop_ms();
  return t;
}

std::size_t copy_size(const BenchmarkOptions& o, const Device& device) {
  if (o.copy_bytes) return o.copy_bytes;
  return device.is_gpu() ? std::size_t{1} << 30 : std::size_t{256} << 20;
}

BenchmarkReport benchmark_impl(const CausalLM& model, const BenchmarkOptions& o, double bandwidth);

}  // namespace

void validate(const BenchmarkOptions& o) {
  if (o.batch < 1) throw_invalid("--batch must be >= 1, got " + std::to_string(o.batch));
  if (o.prompt_len < 1) throw_invalid("--prompt-len must be >= 1, got " + std::to_string(o.prompt_len));
  if (o.gen_len < 2)
    throw_invalid("--gen-len must be >= 2 (the first new token comes from prefill), got " + std::to_string(o.gen_len));
  if (o.warmup < 0) throw_invalid("--warmup must be >= 0, got " + std::to_string(o.warmup));
  if (o.repeat < 1) throw_invalid("--repeat must be >= 1, got " + std::to_string(o.repeat));
}

BenchmarkReport run_benchmark(const CausalLM& model, const BenchmarkOptions& options) {
  validate(options);
  return benchmark_impl(model, options, 0);
}

namespace {

// `bandwidth` 0: measure it here.
BenchmarkReport benchmark_impl(const CausalLM& model, const BenchmarkOptions& o, double bandwidth) {
  const ModelConfig& c = model.config();
  if (o.prompt_len + o.gen_len > c.max_position_embeddings)
    throw_invalid("--prompt-len + --gen-len (" + std::to_string(o.prompt_len + o.gen_len) +
                  ") exceeds the model's max_position_embeddings (" + std::to_string(c.max_position_embeddings) + ")");
  const Device device = model.device();

  BenchmarkReport r;
  r.device = device.str();
  r.device_name = device_name(device);
  r.dtype = dtype_torch_name(model.dtype());
  r.model_type = c.model_type;
  // The backend that runs (a kernel config may still make it the eager kernel).
  r.attn_implementation =
      model.attn_implementation() == AttnImplementation::kEager ? "eager" : model.attention_backend().name;
  r.batch = o.batch;
  r.prompt_len = o.prompt_len;
  r.gen_len = o.gen_len;
  r.warmup = o.warmup;
  r.repeat = o.repeat;
  const WeightCount weights = count_weights(c);
  r.parameters = weights.total;

  r.copy_bandwidth_bytes_per_s = bandwidth > 0 ? bandwidth : measure_copy_bandwidth(device, copy_size(o, device));

  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(c.vocab_size - 1));
  std::vector<std::vector<int32_t>> prompts(static_cast<std::size_t>(o.batch));
  for (auto& p : prompts) {
    p.resize(static_cast<std::size_t>(o.prompt_len));
    for (auto& id : p) id = token(rng);
  }

  DeviceTimer timer(device);
  r.batched = model.supports_batched_steps();
  std::unique_ptr<Engine> engine;
  if (r.batched) {
    EngineOptions eo;
    eo.max_batch = o.batch;
    eo.max_seq_len = o.prompt_len + o.gen_len;
    eo.kv_pages = o.batch * PagedKVCache::pages_for(eo.max_seq_len);
    eo.max_prefill_tokens = std::max<int64_t>(std::min<int64_t>(o.batch * o.prompt_len, 8192), o.batch);
    engine = std::make_unique<Engine>(model, eo);
  }
  auto run_once = [&] {
    return engine ? run_batched(*engine, prompts, o.gen_len, timer, device)
                  : run_sequential(model, prompts, o.gen_len, timer);
  };
  for (int64_t i = 0; i < o.warmup; ++i) run_once();
  std::vector<double> prefill, decode;
  for (int64_t i = 0; i < o.repeat; ++i) {
    const RunTimes t = run_once();
    prefill.push_back(t.prefill_ms);
    decode.push_back(t.decode_ms);
  }
  const double steps = static_cast<double>(o.gen_len - 1);
  r.prefill_ms = median(prefill);
  r.decode_ms = median(decode);
  r.prefill_tokens_per_s = static_cast<double>(o.batch * o.prompt_len) / std::max(r.prefill_ms, 1e-9) * 1e3;
  r.decode_tokens_per_s = static_cast<double>(o.batch) * steps / std::max(r.decode_ms, 1e-9) * 1e3;
  r.ms_per_decode_step = r.decode_ms / steps;
  r.generate_tokens_per_s =
      static_cast<double>(o.batch * o.gen_len) / std::max(r.prefill_ms + r.decode_ms, 1e-9) * 1e3;

  const MemoryStats mem = memory_stats(device);
  r.peak_memory_bytes = mem.peak_bytes;
  r.peak_reserved_bytes = mem.peak_reserved_bytes;
  r.memory_kind = mem.host_rss ? "host_rss" : "gpu_allocator";

  // On a GPU weights and the KV cache are stored in the model dtype; the CPU keeps F32.
  const double storage = static_cast<double>(device.is_gpu() ? dtype_size(model.dtype()) : 4);
  r.weight_bytes = static_cast<double>(weights.per_step) * storage;
  const double kv_per_token = 2.0 * static_cast<double>(c.num_hidden_layers * c.num_key_value_heads * c.head_dim) * storage;
  // Step k (1..gen_len-1) appends position prompt_len + k - 1 and reads prompt_len + k positions.
  const double mean_len = static_cast<double>(o.prompt_len) + (1.0 + steps) / 2.0;
  r.kv_bytes_per_decode_step = static_cast<double>(o.batch) * mean_len * kv_per_token;
  r.decode_bandwidth_bytes_per_s = (r.weight_bytes + r.kv_bytes_per_decode_step) / (r.ms_per_decode_step * 1e-3);
  r.bandwidth_fraction = r.decode_bandwidth_bytes_per_s / r.copy_bandwidth_bytes_per_s;
  return r;
}

}  // namespace

BenchmarkReport run_benchmark(const std::filesystem::path& dir, const ModelLoadOptions& load,
                              const BenchmarkOptions& options) {
  validate(options);
  // Measured before the weights take memory; the buffers go back to the cache.
  const double bandwidth = measure_copy_bandwidth(load.device, copy_size(options, load.device));
  reset_peak_memory_stats(load.device);
  const auto t0 = std::chrono::steady_clock::now();
  CausalLM model = CausalLM::from_pretrained(dir, load);
  synchronize(load.device);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BenchmarkReport r = benchmark_impl(model, options, bandwidth);
  r.load_seconds = load_seconds;
  return r;
}

}  // namespace hipformers

namespace hipformers {

OrderedJson to_json(const BenchmarkReport& r) {
  OrderedJson j;
  j["hipformers_version"] = HIPFORMERS_VERSION;
  j["date"] = utc_now_string();
  j["device"] = r.device;
  j["device_name"] = r.device_name;
  j["dtype"] = r.dtype;
  j["model_type"] = r.model_type;
  j["parameters"] = r.parameters;
  j["attn_implementation"] = r.attn_implementation;
  j["batch"] = r.batch;
  j["prompt_len"] = r.prompt_len;
  j["gen_len"] = r.gen_len;
  j["warmup"] = r.warmup;
  j["repeat"] = r.repeat;
  j["batched"] = r.batched;
  j["load_seconds"] = r.load_seconds;
  j["prefill_ms"] = r.prefill_ms;
  j["prefill_tokens_per_s"] = r.prefill_tokens_per_s;
  j["decode_ms"] = r.decode_ms;
  j["decode_tokens_per_s"] = r.decode_tokens_per_s;
  j["ms_per_decode_step"] = r.ms_per_decode_step;
  j["generate_tokens_per_s"] = r.generate_tokens_per_s;
  j["peak_memory_bytes"] = r.peak_memory_bytes;
  j["peak_reserved_bytes"] = r.peak_reserved_bytes;
  j["memory_kind"] = r.memory_kind;
  j["copy_bandwidth_gb_per_s"] = r.copy_bandwidth_bytes_per_s / 1e9;
  j["weight_bytes_per_decode_step"] = r.weight_bytes;
  j["kv_bytes_per_decode_step"] = r.kv_bytes_per_decode_step;
  j["decode_bandwidth_gb_per_s"] = r.decode_bandwidth_bytes_per_s / 1e9;
  j["bandwidth_fraction"] = r.bandwidth_fraction;
  return j;
}

std::string to_text(const BenchmarkReport& r) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(2);
  s << "hipformers " << HIPFORMERS_VERSION << " bench: " << r.model_type << " (" << r.parameters << " parameters), "
    << r.dtype << ", " << r.device << " (" << r.device_name << "), attn " << r.attn_implementation << "\n"
    << "batch " << r.batch << ", prompt " << r.prompt_len << ", gen " << r.gen_len << " ("
    << (r.batched ? "batched" : "sequences one after another, eager attention") << "), median of " << r.repeat << " after "
    << r.warmup << " warm-up\n"
    << "load:    " << r.load_seconds << " s\n"
    << "prefill: " << r.prefill_ms << " ms, " << r.prefill_tokens_per_s << " tokens/s\n"
    << "decode:  " << r.decode_ms << " ms, " << r.decode_tokens_per_s << " tokens/s, " << r.ms_per_decode_step
    << " ms/step\n"
    << "end to end: " << r.generate_tokens_per_s << " generated tokens/s (prefill + decode)\n"
    << "memory:  peak " << static_cast<double>(r.peak_memory_bytes) / (1 << 20) << " MiB ("
    << (r.memory_kind == "host_rss" ? "process RSS" : "GPU allocator") << ")\n"
    << "ceiling: " << r.decode_bandwidth_bytes_per_s / 1e9 << " GB/s of " << r.copy_bandwidth_bytes_per_s / 1e9
    << " GB/s copy bandwidth (" << 100 * r.bandwidth_fraction << "%)\n";
  return s.str();
}

}  // namespace hipformers
