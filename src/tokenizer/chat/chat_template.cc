#include "hipformers/tokenizer/chat_template.h"

#include "ast.h"
#include "builtins.h"
#include "hipformers/core/error.h"
#include "hipformers/core/utf8.h"
#include "interpreter.h"
#include "lexer.h"
#include "parser.h"

namespace hipformers {

struct ChatTemplate::Impl {
  std::string name;
  chat::Body body;
};

namespace {

using chat::Body;
using chat::Expr;
using chat::ExprKind;
using chat::Node;

[[noreturn]] void fail_line(const std::string& name, int line, const std::string& msg) {
  throw_error(ErrorKind::kUnsupported, name + " line " + std::to_string(line) + ": " + msg);
}

// jinja2 resolves filter and test names at compile time.
void check_expr(const Expr* e, const std::string& name) {
  if (!e) return;
  if (e->kind == ExprKind::kFilter && !chat::has_filter(e->name))
    fail_line(name, e->line, "unsupported filter '" + e->name + "'");
  if (e->kind == ExprKind::kTest && !chat::has_test(e->name))
    fail_line(name, e->line, "unsupported test '" + e->name + "'");
  for (const auto& a : e->args) check_expr(a.get(), name);
  for (const auto& kv : e->kwargs) check_expr(kv.second.get(), name);
}

void check_body(const Body& body, const std::string& name) {
  for (const auto& n : body) {
    check_expr(n->expr.get(), name);
    check_expr(n->cond.get(), name);
    for (const auto& e : n->conds) check_expr(e.get(), name);
    for (const auto& e : n->filters) check_expr(e.get(), name);
    for (const auto& e : n->defaults) check_expr(e.get(), name);
    for (const auto& e : n->values) check_expr(e.get(), name);
    for (const auto& b : n->bodies) check_body(b, name);
    check_body(n->body, name);
    check_body(n->else_body, name);
  }
}

}  // namespace

ChatTemplate ChatTemplate::compile(std::string_view source, const std::string& name) {
  std::size_t bad = 0;
  if (!utf8::is_valid(source, &bad))
    throw_invalid(name + ": template is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  auto impl = std::make_shared<Impl>();
  impl->name = name;
  impl->body = chat::parse_template(chat::lex(source, name), name);
  check_body(impl->body, name);
  return ChatTemplate(std::move(impl));
}

const std::string& ChatTemplate::name() const { return impl_->name; }

std::string ChatTemplate::render(const OrderedJson& messages, const ChatTemplateOptions& options,
                                 const OrderedJson& special_tokens) const {
  using chat::Frame;
  using chat::Value;
  if (!messages.is_array()) throw_invalid(impl_->name + ": messages must be a JSON array");
  if (!special_tokens.is_null() && !special_tokens.is_object())
    throw_invalid(impl_->name + ": special tokens must be a JSON object");
  if (!options.extra.is_null() && !options.extra.is_object())
    throw_invalid(impl_->name + ": extra template arguments must be a JSON object");

  auto globals = std::make_shared<Frame>();
  chat::install_globals(*globals);
  auto context = std::make_shared<Frame>();
  context->parent = globals;
  if (special_tokens.is_object())
    for (auto it = special_tokens.begin(); it != special_tokens.end(); ++it)
      if (!it.value().is_null()) context->vars[it.key()] = chat::from_json(it.value());
  context->vars["messages"] = chat::from_json(messages);
  context->vars["tools"] = chat::from_json(options.tools);
  context->vars["documents"] = chat::from_json(options.documents);
  context->vars["add_generation_prompt"] = Value::boolean(options.add_generation_prompt);
  if (options.extra.is_object())
    for (auto it = options.extra.begin(); it != options.extra.end(); ++it)
      context->vars[it.key()] = chat::from_json(it.value());

  const std::uint64_t budget = 4'000'000 + 100'000 * static_cast<std::uint64_t>(messages.size());
  chat::Interpreter interp(impl_->name, budget);
  return interp.render(impl_->body, context);
}

}  // namespace hipformers
