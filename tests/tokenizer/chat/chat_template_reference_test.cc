// Renders the committed conversations (tests/data/chat_template/conversations.json)
// with the real Qwen3 and Llama 3 chat templates and compares byte-for-byte with
// the reference renderings of Transformers' apply_chat_template(tokenize=False)
// (tests/data/chat_template/reference_<model>.json, produced by
// tests/parity/chat_template_reference.py).
#include <gtest/gtest.h>

#include <string>

#include "hipformers/core/error.h"
#include "hipformers/core/json.h"
#include "hipformers/tokenizer/chat_template.h"
#include "test_paths.h"

namespace hipformers {
namespace {

OrderedJson special_tokens_of(const OrderedJson& config) {
  OrderedJson out = OrderedJson::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
                          "additional_special_tokens"}) {
    if (!config.contains(key) || config[key].is_null()) continue;
    const OrderedJson& v = config[key];
    if (v.is_object() && v.contains("content")) {
      out[key] = v["content"];
    } else if (v.is_array()) {
      OrderedJson list = OrderedJson::array();
      for (const auto& t : v) list.push_back(t.is_object() && t.contains("content") ? t["content"] : t);
      out[key] = list;
    } else {
      out[key] = v;
    }
  }
  return out;
}

void check_model(const std::string& model) {
  auto config = read_ordered_json_file(testing::tokenizer_dir(model) / "tokenizer_config.json");
  auto conversations = read_ordered_json_file(testing::test_data("chat_template/conversations.json"));
  auto reference = read_ordered_json_file(testing::test_data("chat_template/reference_" + model + ".json"));
  ASSERT_TRUE(config.contains("chat_template"));
  ChatTemplate tmpl = ChatTemplate::compile(config["chat_template"].get<std::string>(), model + " chat template");
  OrderedJson specials = special_tokens_of(config);
  const auto& cases = reference["cases"];
  ASSERT_EQ(cases.size(), conversations.size()) << "regenerate reference_" << model << ".json";
  for (std::size_t k = 0; k < conversations.size(); ++k) {
    const auto& conv = conversations[k];
    const auto& ref = cases[k];
    const std::string name = conv["name"].get<std::string>();
    SCOPED_TRACE(model + " / " + name);
    ASSERT_EQ(ref["name"], conv["name"]);
    ChatTemplateOptions opts;
    opts.add_generation_prompt = conv.value("add_generation_prompt", false);
    if (conv.contains("tools")) opts.tools = conv["tools"];
    if (conv.contains("enable_thinking")) opts.extra["enable_thinking"] = conv["enable_thinking"];
    if (!ref["error"].is_null()) {
      EXPECT_THROW(tmpl.render(conv["messages"], opts, specials), Error) << "reference error: " << ref["error"];
      continue;
    }
    std::string got;
    try {
      got = tmpl.render(conv["messages"], opts, specials);
    } catch (const Error& e) {
      ADD_FAILURE() << "render threw: " << e.what();
      continue;
    }
    EXPECT_EQ(got, ref["text"].get<std::string>());
  }
}

TEST(ChatTemplateReference, Qwen3) { check_model("qwen3"); }
TEST(ChatTemplateReference, Llama3) { check_model("llama3"); }

}  // namespace
}  // namespace hipformers
