// tokenize / detokenize / chat-template: the tokenizer layer from the shell.
// Output is exactly the result (ids, text, or rendered template), so these
// compose in pipelines and can be compared byte for byte with Transformers.
#include <charconv>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.h"
#include "hipformers/core/error.h"
#include "hipformers/core/file.h"
#include "hipformers/core/json.h"
#include "hipformers/core/utf8.h"
#include "hipformers/tokenizer/chat_template.h"
#include "hipformers/tokenizer/tokenizer.h"

namespace hipformers::cli {
namespace {

// Accepts "1,2,3", "1 2 3", "[1, 2, 3]" or several such arguments.
std::vector<std::int32_t> parse_id_list(const std::vector<std::string>& args) {
  std::vector<std::int32_t> ids;
  for (const auto& arg : args) {
    std::string token;
    auto flush = [&] {
      if (token.empty()) return;
      long long value = 0;
      auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
      if (ec != std::errc() || ptr != token.data() + token.size())
        throw_invalid("token id '" + token + "' is not an integer");
      if (value < 0 || value > INT32_MAX) throw_invalid("token id " + token + " is out of range");
      ids.push_back(static_cast<std::int32_t>(value));
      token.clear();
    };
    for (char c : arg) {
      if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '[' || c == ']') {
        flush();
      } else {
        token.push_back(c);
      }
    }
    flush();
  }
  return ids;
}

void run_tokenize(const std::string& model, const std::string& file, const std::string& text, bool as_json,
                  bool no_special) {
  if (file.empty() == text.empty() && !(file.empty() && text.empty()))
    throw_invalid("give either --file PATH or TEXT, not both");
  std::string input = file.empty() ? text : read_file(file);
  utf8::require_valid(input, file.empty() ? "TEXT" : file);
  Tokenizer tokenizer = Tokenizer::from_pretrained(model);
  std::vector<std::int32_t> ids = tokenizer.encode(input, !no_special);
  if (as_json) {
    std::cout << Json{{"ids", ids}}.dump() << "\n";
    return;
  }
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  std::cout << out << "\n";
}

void run_detokenize(const std::string& model, const std::vector<std::string>& id_args, bool skip_special) {
  std::vector<std::int32_t> ids = parse_id_list(id_args);
  Tokenizer tokenizer = Tokenizer::from_pretrained(model);
  std::cout << tokenizer.decode(ids, skip_special);
}

void run_chat_template(const std::string& model, const std::string& messages_file, const std::string& tools_file,
                       bool add_generation_prompt, const std::string& enable_thinking) {
  OrderedJson doc = read_ordered_json_file(messages_file);
  OrderedJson messages;
  ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  // Either a bare list of messages, or {"messages": [...], "tools": [...]}.
  if (doc.is_array()) {
    messages = doc;
  } else if (doc.is_object() && doc.contains("messages")) {
    messages = doc["messages"];
    if (doc.contains("tools")) options.tools = doc["tools"];
    if (doc.contains("documents")) options.documents = doc["documents"];
  } else {
    throw_invalid(messages_file + ": expected a JSON list of messages or an object with \"messages\"");
  }
  if (!messages.is_array()) throw_invalid(messages_file + ": \"messages\" must be a list");
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].is_object() || !messages[i].contains("role"))
      throw_invalid(messages_file + ": message " + std::to_string(i) + " must be an object with a \"role\"");
  }
  if (!tools_file.empty()) options.tools = read_ordered_json_file(tools_file);
  options.extra = OrderedJson::object();
  if (!enable_thinking.empty()) options.extra["enable_thinking"] = (enable_thinking == "true");

  Tokenizer tokenizer = Tokenizer::from_pretrained(model);
  const TokenizerConfig& config = tokenizer.config();
  if (!config.chat_template)
    throw_invalid(model + ": tokenizer_config.json has no chat_template");
  ChatTemplate chat = ChatTemplate::compile(*config.chat_template, model + " chat template");
  std::cout << chat.render(messages, options, config.chat_template_special_tokens());
}

}  // namespace

void add_tokenizer_commands(CLI::App& app) {
  struct TokenizeArgs {
    std::string model, file, text;
    bool json = false, no_special = false;
  };
  auto t = std::make_shared<TokenizeArgs>();
  auto* tokenize = app.add_subcommand("tokenize", "Print the token ids of a text (as Transformers' tokenizer(text))");
  tokenize->add_option("--model", t->model, "Model directory holding tokenizer.json")->required();
  tokenize->add_option("--file", t->file, "Read the text from this file");
  tokenize->add_option("text", t->text, "The text to tokenize");
  tokenize->add_flag("--json", t->json, "Print {\"ids\": [...]}");
  tokenize->add_flag("--no-special-tokens", t->no_special, "Do not add BOS/EOS the post-processor would add");
  tokenize->callback([t] { run_tokenize(t->model, t->file, t->text, t->json, t->no_special); });

  struct DetokenizeArgs {
    std::string model;
    std::vector<std::string> ids;
    bool skip_special = false;
  };
  auto d = std::make_shared<DetokenizeArgs>();
  auto* detokenize = app.add_subcommand("detokenize", "Print the text of token ids (as Transformers' decode)");
  detokenize->add_option("--model", d->model, "Model directory holding tokenizer.json")->required();
  detokenize->add_flag("--skip-special-tokens", d->skip_special, "Drop special tokens");
  detokenize->add_option("ids", d->ids, "Ids: 1,2,3 or \"1 2 3\" or [1,2,3]")->required();
  detokenize->callback([d] { run_detokenize(d->model, d->ids, d->skip_special); });

  struct ChatArgs {
    std::string model, messages, tools, enable_thinking;
    bool add_generation_prompt = false;
  };
  auto c = std::make_shared<ChatArgs>();
  auto* chat = app.add_subcommand("chat-template", "Render the model's chat template (as apply_chat_template)");
  chat->add_option("--model", c->model, "Model directory holding tokenizer_config.json")->required();
  chat->add_option("--messages", c->messages, "JSON file: a list of messages, or {\"messages\":[...],\"tools\":[...]}")
      ->required();
  chat->add_option("--tools", c->tools, "JSON file with a list of tool definitions");
  chat->add_flag("--add-generation-prompt", c->add_generation_prompt, "End with the assistant turn's header");
  chat->add_option("--enable-thinking", c->enable_thinking, "Pass enable_thinking=true|false to the template")
      ->check(CLI::IsMember({"true", "false"}));
  chat->callback([c] { run_chat_template(c->model, c->messages, c->tools, c->add_generation_prompt, c->enable_thinking); });
}

}  // namespace hipformers::cli
