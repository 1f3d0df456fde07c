// Tree-walking evaluator of a parsed template with jinja2's scoping rules
// (one scope per loop iteration, macros see their defining scope at call time),
// sandbox attribute rules and Undefined semantics. Bounded: evaluation steps,
// output size and macro recursion.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "ast.h"
#include "hipformers/core/error.h"
#include "value.h"

namespace hipformers::chat {

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};

// An error raised by the template itself through raise_exception(); its
// message is reported verbatim.
class TemplateRaised : public Error {
 public:
  explicit TemplateRaised(const std::string& msg) : Error(ErrorKind::kInvalidInput, msg) {}
};

class Interpreter {
 public:
  Interpreter(const std::string& name, std::uint64_t step_budget);

  // Renders `body` with `context` as the template-level scope.
  std::string render(const Body& body, std::shared_ptr<Frame> context);

  Value eval(const Expr& e);
  Value call(const Value& callee, CallArgs& args);
  Value filter(const std::string& name, const Value& v, CallArgs& args);
  bool test(const std::string& name, const Value& v, CallArgs& args);
  Value get_attr(const Value& obj, const std::string& attr);  // obj.attr
  Value get_item(const Value& obj, const Value& key);         // obj[key]
  // Renders a macro body in a fresh scope below `closure`, returning the text.
  Value call_macro(const Node& macro, const std::shared_ptr<Frame>& closure, CallArgs& args, const Value* caller);

  void step(std::uint64_t n = 1);
  int line() const { return line_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec_body(const Body& body);
  Flow exec(const Node& n);
  Flow exec_for(const Node& n);
  void exec_set(const Node& n);
  void write(const std::string& s);
  Value lookup(const std::string& name);
  void assign(const std::string& name, Value v);
  void unpack(const std::vector<std::string>& targets, const Value& v);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value v);
  std::string capture(const Body& body);
  void args_of(const Expr& e, std::size_t first, CallArgs& out);

  const std::string& name_;
  std::uint64_t steps_left_;
  std::string* out_ = nullptr;
  std::shared_ptr<Frame> frame_;
  int line_ = 0;
  int call_depth_ = 0;
};

}  // namespace hipformers::chat
