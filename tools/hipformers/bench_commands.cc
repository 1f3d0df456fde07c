// `hipformers bench`: prefill and decode speed, peak memory and the fraction
// of the copy-bandwidth ceiling (src/generation/benchmark.cc), as text or one
// JSON object. `bench --make-model SHAPE --output DIR` writes a random
// checkpoint to benchmark, exactly as `hipformers make-model` does.
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "hipformers/core/dtype.h"
#include "hipformers/core/error.h"
#include "hipformers/generation/benchmark.h"
#include "hipformers/kernels/attention_backends.h"
#include "hipformers/kernels/registry.h"
#include "hipformers/runtime/device.h"
#include "make_model.h"

namespace hipformers::cli {
namespace {

struct BenchArgs {
  std::string model, device = "auto", dtype = "auto", attn = "sdpa", kernel_config;
  bool use_kernels = false;
  BenchmarkOptions options;
  std::size_t copy_mib = 0;
  bool json = false;
  std::string make_model, output;
};

void run_bench(const BenchArgs& a) {
  if (!a.make_model.empty()) {
    if (!a.model.empty()) throw_invalid("bench: give either --model or --make-model, not both");
    if (a.output.empty()) throw_invalid("bench --make-model needs --output DIR");
    MakeModelArgs m;
    m.shape = a.make_model;
    m.output = a.output;
    if (a.dtype != "auto") m.dtype = a.dtype;
    m.seed = a.options.seed;
    run_make_model(m);
    return;
  }
  if (a.model.empty()) throw_invalid("bench needs --model DIR (or --make-model SHAPE --output DIR)");
  if (!a.output.empty()) throw_invalid("bench: --output only goes with --make-model");
  BenchmarkOptions o = a.options;
  o.copy_bytes = a.copy_mib << 20;
  validate(o);  // before the model is loaded
  ModelLoadOptions load;
  if (a.dtype != "auto") {
    const std::optional<DType> dtype = parse_torch_dtype(a.dtype);
    if (!dtype) throw_invalid("unknown --dtype '" + a.dtype + "': use auto, float32, bfloat16 or float16");
    load.dtype = *dtype;
  }
  load.device = resolve_device(a.device);
  // Any backend the device has (eager, sdpa, flash_attention_2/3, aliases),
  // resolved as `generate --attn` resolves it.
  load.attention_backend = kernels::resolve_attention_backend(a.attn, kernels::device_key(load.device));
  if (load.attention_backend->name == "eager") load.attn_implementation = AttnImplementation::kEager;
  kernels::log_attention_notice_once(*load.attention_backend);
  load.use_kernels = a.use_kernels;
  if (!a.kernel_config.empty()) load.kernel_config = kernels::KernelConfig::from_file(a.kernel_config);
  const BenchmarkReport report = run_benchmark(a.model, load, o);
  if (a.json)
    std::cout << to_json(report).dump() << "\n";
  else
    std::cout << to_text(report);
}

}  // namespace

void add_bench_commands(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prefill/decode speed, peak memory and bandwidth use");
  cmd->add_option("--model", a->model, "Model directory (config.json + safetensors)");
  cmd->add_option("--batch", a->options.batch, "Sequences")->capture_default_str();
  cmd->add_option("--prompt-len", a->options.prompt_len, "Prompt tokens per sequence (seeded random ids)")
      ->capture_default_str();
  cmd->add_option("--gen-len", a->options.gen_len, "New tokens per sequence (the first from prefill), >= 2")
      ->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "auto, float32, bfloat16 or float16")->capture_default_str();
  cmd->add_option("--device", a->device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  cmd->add_option("--attn", a->attn, "eager, sdpa, flash_attention_2, flash_attention_3 or a kernel repository")->capture_default_str();
  auto* uk = cmd->add_flag("--use-kernels", a->use_kernels,
                           "Choose each layer's kernel from the registry (see 'hipformers kernels')");
  cmd->add_option("--kernel-config", a->kernel_config,
                  "JSON {\"<layer>\": {\"<device>\": \"<kernel>\"}} overriding the defaults (needs --use-kernels)")
      ->needs(uk);
  cmd->add_option("--warmup", a->options.warmup, "Untimed runs first")->capture_default_str();
  cmd->add_option("--repeat", a->options.repeat, "Timed runs (medians are reported)")->capture_default_str();
  cmd->add_option("--seed", a->options.seed, "Seed of the prompt ids (and of --make-model's weights)")
      ->capture_default_str();
  cmd->add_option("--copy-mib", a->copy_mib, "Buffer for the copy-bandwidth ceiling in MiB (0: 1024 GPU, 256 CPU)")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->add_option("--make-model", a->make_model, "Instead: write a random checkpoint of this shape (as make-model --shape)");
  cmd->add_option("--output", a->output, "Directory for --make-model");
  cmd->callback([a] { run_bench(*a); });
}

}  // namespace hipformers::cli
