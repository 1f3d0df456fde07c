// generate / logits: run a model from the shell. `generate` streams the
// continuation to stdout as tokens come (or prints one JSON object with
// --json); `logits` writes every position's logits to a safetensors file,
// which tests/parity/compare.py checks against Transformers.
#include <charconv>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "hipformers/core/error.h"
#include "hipformers/core/file.h"
#include "hipformers/core/utf8.h"
#include "hipformers/core/json.h"
#include "hipformers/hipformers.h"
#include "hipformers/io/safetensors.h"

namespace hipformers::cli {
namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string token;
  auto flush = [&] {
    if (token.empty()) return;
    long long value = 0;
    auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (ec != std::errc() || ptr != token.data() + token.size()) throw_invalid("token id '" + token + "' is not an integer");
    if (value < 0 || value > INT32_MAX) throw_invalid("token id " + token + " is out of range");
    ids.push_back(static_cast<int32_t>(value));
    token.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '[' || c == ']' || c == '\n' || c == '\t') flush();
    else token.push_back(c);
  }
  flush();
  if (ids.empty()) throw_invalid("--token-ids holds no ids");
  return ids;
}

struct ModelArgs {
  std::string model, device = "auto", dtype = "auto", attn = "sdpa", kernel_config;
  bool use_kernels = false;
};

void add_model_options(CLI::App* cmd, ModelArgs& a) {
  cmd->add_option("--model", a.model, "Model directory (config.json, safetensors, tokenizer.json)")->required();
  cmd->add_option("--device", a.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  cmd->add_option("--dtype", a.dtype, "auto, float32, bfloat16 or float16")->capture_default_str();
  cmd->add_option("--attn", a.attn,
                  "eager, sdpa, flash_attention_2, flash_attention_3 or a kernel repository "
                  "(kernels-community/flash-attn, kernels-community/flash-attn3, kernels-community/aiter-flash-attn)")
      ->capture_default_str();
  auto* uk = cmd->add_flag("--use-kernels", a.use_kernels,
                           "Choose each layer's kernel from the registry (see 'hipformers kernels')");
  cmd->add_option("--kernel-config", a.kernel_config,
                  "JSON {\"<layer>\": {\"<device>\": \"<kernel>\"}} overriding the defaults (needs --use-kernels)")
      ->needs(uk);
}

PreTrainedModel load_model(const ModelArgs& a) {
  PretrainedOptions o;
  o.dtype = a.dtype;
  o.device_map = a.device;
  o.attn_implementation = a.attn;
  o.use_kernels = a.use_kernels;
  if (!a.kernel_config.empty()) o.kernel_config = kernels::KernelConfig::from_file(a.kernel_config);
  return AutoModelForCausalLM::from_pretrained(a.model, o);
}

std::optional<Tokenizer> load_tokenizer_if_present(const std::string& dir) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) return std::nullopt;
  return Tokenizer::from_pretrained(dir);
}

struct GenerateArgs : ModelArgs {
  std::string prompt, token_ids, prompts_file;
  bool chat = false, json = false, do_sample = false;
  std::optional<int64_t> max_new_tokens, top_k;
  int64_t min_new_tokens = 0;
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  uint64_t seed = 0;
  std::vector<std::string> stop;
};

// Prints text as tokens arrive: decodes everything generated so far and writes
// what is new, holding back a trailing incomplete UTF-8 character (U+FFFD).
class TextStreamer {
 public:
  explicit TextStreamer(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}
  void push(int32_t id) {
    ids_.push_back(id);
    if (!tokenizer_) {
      std::cout << (ids_.size() > 1 ? " " : "") << id << std::flush;
      return;
    }
    std::string text = tokenizer_->decode(ids_, true);
    if (text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0) return;
    if (text.size() > printed_) {
      std::cout << text.substr(printed_) << std::flush;
      printed_ = text.size();
    }
  }

 private:
  const Tokenizer* tokenizer_;
  std::vector<int32_t> ids_;
  std::size_t printed_ = 0;
};

GenerationOptions to_options(const GenerateArgs& a) {
  GenerationOptions o;
  o.max_new_tokens = a.max_new_tokens;
  o.min_new_tokens = a.min_new_tokens;
  // The CLI is greedy unless asked to sample; sampling values left unset come
  // from generation_config.json.
  o.do_sample = a.do_sample;
  o.temperature = a.temperature;
  o.top_k = a.top_k;
  o.top_p = a.top_p;
  o.min_p = a.min_p;
  o.repetition_penalty = a.repetition_penalty;
  o.seed = a.seed;
  o.stop_strings = a.stop;
  return o;
}

// The prompts of --prompts-file: one per non-empty line (a trailing \r is dropped).
std::vector<std::string> read_prompt_lines(const std::string& path) {
  const std::string text = read_file(path);
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
    begin = end + 1;
  }
  if (lines.empty()) throw_invalid(path + ": no prompts (one per non-empty line)");
  return lines;
}

// --prompts-file: every line is a prompt; all of them run as one continuously
// batched generate, and one JSON object per prompt is printed, in file order.
void run_generate_file(const GenerateArgs& a, const PreTrainedModel& model, const Tokenizer& tok,
                       const GenerationOptions& options) {
  const std::vector<std::string> lines = read_prompt_lines(a.prompts_file);
  std::vector<std::vector<int32_t>> prompts;
  prompts.reserve(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    utf8::require_valid(lines[i], a.prompts_file + ": prompt " + std::to_string(i));
    prompts.push_back(tok.encode(lines[i]));
  }
  const std::vector<GeneratedSequence> results =
      generate(model.model(), model.generation_config(), prompts, options, &tok);
  for (std::size_t i = 0; i < results.size(); ++i) {
    Json out{{"index", i}, {"ids", results[i].generated}};
    out["text"] = tok.decode(results[i].generated, true);
    out["stop_reason"] = stop_reason_name(results[i].stop_reason);
    std::cout << out.dump() << "\n";
  }
}

void run_generate(const GenerateArgs& a) {
  const int sources = !a.prompt.empty() + !a.token_ids.empty() + a.chat + !a.prompts_file.empty();
  if (sources != 1) throw_invalid("give exactly one of --prompt, --token-ids, --prompts-file or --chat");
  std::optional<Tokenizer> tokenizer = load_tokenizer_if_present(a.model);
  if (!tokenizer && a.token_ids.empty())
    throw_invalid(a.model + ": no tokenizer.json, so only --token-ids prompts can be used");
  if (!a.prompts_file.empty() && !a.json) throw_invalid("--prompts-file prints JSON lines: add --json");
  if (!tokenizer && !a.stop.empty()) throw_invalid(a.model + ": --stop needs a tokenizer.json");
  PreTrainedModel model = load_model(a);
  GenerationOptions options = to_options(a);
  const Tokenizer* tok = tokenizer ? &*tokenizer : nullptr;
  if (!a.prompts_file.empty()) return run_generate_file(a, model, *tok, options);

  if (a.chat) {
    if (a.json) throw_invalid("--chat and --json cannot be combined");
    OrderedJson messages = OrderedJson::array();
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line.empty()) continue;
      messages.push_back({{"role", "user"}, {"content", line}});
      std::vector<int32_t> ids = tok->encode(apply_chat_template(*tok, messages), false);
      TextStreamer streamer(tok);
      options.on_token = [&](std::size_t, int32_t id) { streamer.push(id); return true; };
      auto result = generate(model.model(), model.generation_config(), {ids}, options, tok).front();
      std::cout << "\n" << std::flush;
      messages.push_back({{"role", "assistant"}, {"content", tok->decode(result.generated, true)}});
    }
    return;
  }

  std::vector<int32_t> ids = a.token_ids.empty() ? tok->encode(a.prompt) : parse_ids(a.token_ids);
  TextStreamer streamer(tok);
  if (!a.json) options.on_token = [&](std::size_t, int32_t id) { streamer.push(id); return true; };
  auto result = generate(model.model(), model.generation_config(), {ids}, options, tok).front();
  if (a.json) {
    Json out{{"ids", result.generated}};
    out["text"] = tok ? Json(tok->decode(result.generated, true)) : Json(nullptr);
    out["attn_implementation"] = model.attn_implementation();  // after resolution for the device
    out["kernels"] = model.kernels().to_json();
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "\n";
  }
}

struct LogitsArgs : ModelArgs {
  std::string token_ids, output;
};

void run_logits(const LogitsArgs& a) {
  std::vector<int32_t> ids = parse_ids(a.token_ids);
  PreTrainedModel model = load_model(a);
  Tensor logits = model.logits(ids);
  TensorToWrite t{"logits", DType::kF32, {logits.size(0), logits.size(1)}, logits.raw_data(), logits.nbytes()};
  save_safetensors(a.output, std::span<const TensorToWrite>(&t, 1), {{"format", "pt"}});
}

}  // namespace

void add_generate_commands(CLI::App& app) {
  auto g = std::make_shared<GenerateArgs>();
  auto* gen = app.add_subcommand("generate", "Generate a continuation (greedy unless --do-sample), streamed to stdout");
  add_model_options(gen, *g);
  gen->add_option("--prompt", g->prompt, "Prompt text (tokenized with the model's tokenizer)");
  gen->add_option("--token-ids", g->token_ids, "Prompt as token ids: 1,2,3");
  gen->add_option("--prompts-file", g->prompts_file,
                  "One prompt per line, all generated in one continuously batched run; prints one JSON line per "
                  "prompt ({\"index\", \"ids\", \"text\", \"stop_reason\"}; needs --json)");
  gen->add_flag("--chat", g->chat, "Chat: read one user turn per stdin line, answer each with the chat template");
  gen->add_option("--max-new-tokens", g->max_new_tokens, "Tokens to generate at most (default: generation_config.json)");
  gen->add_option("--min-new-tokens", g->min_new_tokens, "EOS is not allowed before this many tokens");
  gen->add_flag("--do-sample", g->do_sample, "Sample instead of greedy decoding");
  gen->add_option("--temperature", g->temperature, "Sampling temperature");
  gen->add_option("--top-k", g->top_k, "Keep the k most likely tokens (0 = off)");
  gen->add_option("--top-p", g->top_p, "Nucleus sampling threshold");
  gen->add_option("--min-p", g->min_p, "Drop tokens below min_p x the top probability");
  gen->add_option("--repetition-penalty", g->repetition_penalty, "Penalty for tokens already present (1 = off)");
  gen->add_option("--seed", g->seed, "Sampling seed");
  gen->add_option("--stop", g->stop, "Stop once the generated text contains this string (repeatable)");
  gen->add_flag("--json", g->json, "Print {\"ids\": [generated ids], \"text\": ...} instead of streaming");
  gen->callback([g] { run_generate(*g); });

  auto l = std::make_shared<LogitsArgs>();
  auto* lg = app.add_subcommand("logits", "Write float32 logits of every position to a safetensors file");
  add_model_options(lg, *l);
  lg->add_option("--token-ids", l->token_ids, "Input token ids: 1,2,3")->required();
  lg->add_option("--output", l->output, "Output .safetensors file (tensor 'logits' [tokens, vocab])")->required();
  lg->callback([l] { run_logits(*l); });
}

}  // namespace hipformers::cli
