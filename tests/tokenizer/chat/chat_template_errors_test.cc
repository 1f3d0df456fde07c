// Error reporting (line/column, one clear message), API behaviour (defined vs
// undefined kwargs, tools/documents None, special tokens) and resource bounds.
#include <gtest/gtest.h>

#include <string>

#include "hipformers/core/error.h"
#include "hipformers/core/json.h"
#include "hipformers/tokenizer/chat_template.h"

namespace hipformers {
namespace {

std::string compile_error(const std::string& src) {
  try {
    ChatTemplate::compile(src);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string render(const std::string& src, const OrderedJson& messages = OrderedJson::array(),
                   const ChatTemplateOptions& opts = {}, const OrderedJson& specials = OrderedJson::object()) {
  return ChatTemplate::compile(src).render(messages, opts, specials);
}

std::string render_error(const std::string& src, const ChatTemplateOptions& opts = {}) {
  try {
    render(src, OrderedJson::array(), opts);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplateErrors, UnsupportedTagNamesLineAndColumn) {
  std::string e = compile_error("line1\nline2\n  {% include 'x.j2' %}");
  EXPECT_NE(e.find("chat template line 3, column 6"), std::string::npos) << e;
  EXPECT_NE(e.find("unsupported tag 'include'"), std::string::npos) << e;
}

TEST(ChatTemplateErrors, CustomNameInMessage) {
  try {
    ChatTemplate::compile("{% extends 'a' %}", "qwen3 chat template");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("qwen3 chat template line 1", 0), 0u) << e.what();
  }
}

TEST(ChatTemplateErrors, SyntaxErrors) {
  EXPECT_NE(compile_error("{% if x %}\nabc").find("line 2"), std::string::npos);
  EXPECT_NE(compile_error("{% if x %}abc").find("expected 'elif' or 'else' or 'endif'"), std::string::npos);
  EXPECT_NE(compile_error("{{ 1 + }}").find("unexpected"), std::string::npos);
  EXPECT_NE(compile_error("a\n{{ x | nosuch }}").find("line 2: unsupported filter 'nosuch'"), std::string::npos);
  EXPECT_NE(compile_error("{{ x is nosuch }}").find("unsupported test 'nosuch'"), std::string::npos);
  EXPECT_NE(compile_error("{% endfor %}").find("unexpected tag 'endfor'"), std::string::npos);
  EXPECT_NE(compile_error("{{ 'abc }}").find("unterminated string"), std::string::npos);
  EXPECT_NE(compile_error("{# abc").find("missing end of comment"), std::string::npos);
  EXPECT_NE(compile_error("{% break %}").find("outside of a loop"), std::string::npos);
  EXPECT_NE(compile_error("{{ (1 }}").find("line 1"), std::string::npos);
  EXPECT_NE(compile_error(std::string("\xff")).find("not valid UTF-8"), std::string::npos);
}

TEST(ChatTemplateErrors, RuntimeErrorsNameLine) {
  std::string e = render_error("ok\n\n{{ messages[0].content + 1 }}");
  EXPECT_NE(e.find("line 3"), std::string::npos) << e;
  e = render_error("{{ 'a' + 1 }}");
  EXPECT_NE(e.find("can only concatenate str (not \"int\") to str"), std::string::npos) << e;
  e = render_error("{{ foo.bar }}");
  EXPECT_NE(e.find("'foo' is undefined"), std::string::npos) << e;
  e = render_error("{{ [1].append(2) }}");
  EXPECT_NE(e.find("access to attribute 'append' of 'list' object is unsafe."), std::string::npos) << e;
}

TEST(ChatTemplateErrors, RaiseExceptionMessageIsVerbatim) {
  EXPECT_EQ(render_error("{{ raise_exception('Conversation roles must alternate') }}"),
            "Conversation roles must alternate");
}

TEST(ChatTemplateApi, ContextVariables) {
  const std::string src =
      "{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|{{ enable_thinking is defined }}|{{ bos_token }}";
  ChatTemplateOptions opts;
  EXPECT_EQ(render(src, OrderedJson::array(), opts, {{"bos_token", "<s>"}}), "None|None|False|False|<s>");
  opts.add_generation_prompt = true;
  opts.extra = {{"enable_thinking", false}};
  opts.tools = OrderedJson::array({{{"name", "f"}}});
  EXPECT_EQ(render("{{ tools }}|{{ add_generation_prompt }}|{{ enable_thinking }}|{{ enable_thinking is false }}",
                   OrderedJson::array(), opts),
            "[{'name': 'f'}]|True|False|True");
  // Null special tokens are simply not defined.
  EXPECT_EQ(render("{{ bos_token is defined }}", OrderedJson::array(), {}, {{"bos_token", nullptr}}), "False");
}

TEST(ChatTemplateApi, IntegerAndFloatFromJson) {
  auto messages = parse_ordered_json(R"([{"a": 1, "b": 1.0, "c": 1e-05, "d": 0.5, "e": 12345678901234}])", "m");
  EXPECT_EQ(render("{{ messages[0].a }} {{ messages[0].b }} {{ messages[0].c }} {{ messages[0]|tojson }}", messages),
            "1 1.0 1e-05 {\"a\": 1, \"b\": 1.0, \"c\": 1e-05, \"d\": 0.5, \"e\": 12345678901234}");
}

TEST(ChatTemplateApi, TemplateIsReusable) {
  ChatTemplate t = ChatTemplate::compile("{% for m in messages %}{{ m.role }};{% endfor %}");
  auto m1 = parse_ordered_json(R"([{"role": "user"}])", "m");
  auto m2 = parse_ordered_json(R"([{"role": "a"}, {"role": "b"}])", "m");
  EXPECT_EQ(t.render(m1, {}, OrderedJson::object()), "user;");
  EXPECT_EQ(t.render(m2, {}, OrderedJson::object()), "a;b;");
}

TEST(ChatTemplateLimits, RunawayLoopsAndHugeStringsFail) {
  EXPECT_THROW(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"), Error);
  EXPECT_THROW(render("{{ 'x' * 100000000000 }}"), Error);
  EXPECT_THROW(render("{% set s = 'x' * 1000000 %}{% for i in range(100) %}{{ s }}{% endfor %}"), Error);
  EXPECT_THROW(render("{{ 2 ** 100 }}"), Error);
  EXPECT_THROW(render("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"), Error);
  EXPECT_THROW(render("{% set ns = namespace() %}{% set ns.x = ns %}{{ ns }}"), Error);
  EXPECT_THROW(ChatTemplate::compile("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"), Error);
  std::string deep;
  for (int k = 0; k < 5000; ++k) deep += "{% if true %}";
  EXPECT_THROW(ChatTemplate::compile(deep), Error);
  std::string chain = "{{ 1";
  for (int k = 0; k < 5000; ++k) chain += " + 1";
  EXPECT_THROW(ChatTemplate::compile(chain + " }}"), Error);
}

}  // namespace
}  // namespace hipformers

namespace hipformers {
namespace {

TEST(ChatTemplateLimits, DeepParensWithinLexerLimitStillBounded) {
  // 150 nested parentheses pass the lexer but must hit the parser's depth limit
  // or render correctly, never overflow the stack.
  std::string src = "{{ " + std::string(150, '(') + "1" + std::string(150, ')') + " }}";
  try {
    EXPECT_EQ(ChatTemplate::compile(src).render(OrderedJson::array(), {}, OrderedJson::object()), "1");
  } catch (const Error&) {
  }
  std::string negs = "{{ " + std::string(3000, '-') + "1 }}";
  EXPECT_THROW(ChatTemplate::compile(negs), Error);
  std::string nots = "{{ ";
  for (int k = 0; k < 3000; ++k) nots += "not ";
  EXPECT_THROW(ChatTemplate::compile(nots + "1 }}"), Error);
  std::string filters = "{{ 1";
  for (int k = 0; k < 3000; ++k) filters += "|abs";
  EXPECT_THROW(ChatTemplate::compile(filters + " }}"), Error);
}

}  // namespace
}  // namespace hipformers
