// libFuzzer harness for the chat-template engine: arbitrary bytes are compiled
// as a template and, when that succeeds, rendered against a small fixed
// conversation. Any hipformers::Error is an expected outcome; crashes, hangs
// and unbounded memory use are bugs.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hipformers/core/error.h"
#include "hipformers/core/json.h"
#include "hipformers/tokenizer/chat_template.h"

namespace {

const hipformers::OrderedJson& messages() {
  static const hipformers::OrderedJson m = hipformers::parse_ordered_json(
      R"([{"role": "system", "content": "You are helpful."},
          {"role": "user", "content": "Hi \u00e9 \ud83d\ude00"},
          {"role": "assistant", "content": "<think>\nr\n</think>\n\nHello", "reasoning_content": null,
           "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": [0.5, 1e-05, true]}}}]},
          {"role": "tool", "content": "{\"ok\": true}"}])",
      "fuzz messages");
  return m;
}

const hipformers::OrderedJson& specials() {
  static const hipformers::OrderedJson s = {{"bos_token", "<s>"}, {"eos_token", "</s>"},
                                            {"additional_special_tokens", {"<a>", "<b>"}}};
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view src(reinterpret_cast<const char*>(data), size);
  try {
    hipformers::ChatTemplate t = hipformers::ChatTemplate::compile(src);
    hipformers::ChatTemplateOptions opts;
    opts.add_generation_prompt = size % 2 == 0;
    opts.tools = hipformers::OrderedJson::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
    opts.extra = {{"enable_thinking", false}};
    (void)t.render(messages(), opts, specials());
  } catch (const hipformers::Error&) {
  }
  return 0;
}
