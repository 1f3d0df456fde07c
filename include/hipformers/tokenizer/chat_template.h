// Chat templates: a Jinja-subset interpreter that renders Hugging Face chat
// templates exactly as Transformers' `tokenizer.apply_chat_template(...,
// tokenize=False)` does (jinja2 ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and loop controls; Python value semantics).
//
// Errors: syntax errors and unsupported syntax throw hipformers::Error at
// compile() naming the line and column ("chat template line 12, column 3:
// unsupported tag 'include'"); runtime errors (undefined attribute access,
// type errors, sandbox violations) throw at render() naming the line; a
// template's own raise_exception(msg) throws Error with exactly `msg`.
// Evaluation is bounded (step budget, 64 MiB strings/output, nesting depth).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "hipformers/core/json.h"

namespace hipformers {

struct ChatTemplateOptions {
  bool add_generation_prompt = false;
  OrderedJson tools;      // null = not given (template sees None)
  OrderedJson documents;  // null = not given
  OrderedJson extra;      // object of extra kwargs, e.g. {"enable_thinking": false}; only these are "defined"
};

class ChatTemplate {
 public:
  // Parses once; throws Error("<name> line L, column C: ...") on syntax errors / unsupported syntax.
  static ChatTemplate compile(std::string_view source, const std::string& name = "chat template");

  // `messages`: JSON array of {role, content, ...}; `special_tokens`: object like
  // {"bos_token": "<s>", ...} (null or missing entries are simply not defined).
  std::string render(const OrderedJson& messages, const ChatTemplateOptions& options,
                     const OrderedJson& special_tokens) const;

  const std::string& name() const;

  struct Impl;

 private:
  explicit ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace hipformers
