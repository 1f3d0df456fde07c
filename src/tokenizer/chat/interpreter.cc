#include "interpreter.h"

#include <algorithm>

#include "builtins.h"
#include "operators.h"
#include "pystring.h"

namespace hipformers::chat {

namespace {

constexpr int kMaxCallDepth = 64;

std::string object_name(const Value& v) {
  if (v.is_none()) return "'None'";
  return "'" + type_name(v) + " object'";
}

}  // namespace

Interpreter::Interpreter(const std::string& name, std::uint64_t step_budget)
    : name_(name), steps_left_(step_budget) {}

void Interpreter::step(std::uint64_t n) {
  if (n >= steps_left_) {
    steps_left_ = 0;
    throw_invalid("template evaluation exceeded its step budget (runaway loop?)");
  }
  steps_left_ -= n;
}

void Interpreter::write(const std::string& s) {
  if (out_->size() + s.size() > kMaxStringBytes) throw_invalid("rendered output exceeds 64 MiB");
  out_->append(s);
}

std::string Interpreter::render(const Body& body, std::shared_ptr<Frame> context) {
  std::string out;
  out_ = &out;
  frame_ = std::move(context);
  try {
    exec_body(body);
  } catch (const TemplateRaised&) {
    throw;
  } catch (const Error& e) {
    throw Error(e.kind(), name_ + " line " + std::to_string(line_) + ": " + e.what());
  }
  return out;
}

Value Interpreter::lookup(const std::string& name) {
  for (Frame* f = frame_.get(); f; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

void Interpreter::assign(const std::string& name, Value v) { frame_->vars[name] = std::move(v); }

void Interpreter::unpack(const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    assign(targets[0], v);
    return;
  }
  std::vector<Value> items = iterate(v);
  if (items.size() < targets.size())
    throw_invalid("not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                  std::to_string(items.size()) + ")");
  if (items.size() > targets.size())
    throw_invalid("too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  for (std::size_t k = 0; k < targets.size(); ++k) assign(targets[k], items[k]);
}

Value Interpreter::get_attr(const Value& obj, const std::string& attr) {
  switch (obj.kind) {
    case Kind::kUndefined: undefined_error(obj);
    case Kind::kDict: {
      Value m = builtin_method(obj, attr);
      if (!m.is_undefined() || !m.s.empty()) return m;
      if (const Value* v = obj.dict->find(std::string_view(attr))) return *v;
      return Value::undefined(object_name(obj) + " has no attribute '" + attr + "'");
    }
    case Kind::kString:
    case Kind::kList: {
      Value m = builtin_method(obj, attr);
      if (m.is_undefined() && m.s.empty()) m.s = object_name(obj) + " has no attribute '" + attr + "'";
      return m;
    }
    case Kind::kNamespace: {
      if (const Value* v = obj.ns->attrs.find(std::string_view(attr))) return *v;
      return Value::undefined(object_name(obj) + " has no attribute '" + attr + "'");
    }
    default: return Value::undefined(object_name(obj) + " has no attribute '" + attr + "'");
  }
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Kind::kUndefined: undefined_error(obj);
    case Kind::kDict: {
      if (hashable(key))
        if (const Value* v = obj.dict->find(key)) return *v;
      break;
    }
    case Kind::kList:
    case Kind::kString: {
      if (key.kind == Kind::kInt || key.kind == Kind::kBool) {
        std::int64_t i = key.kind == Kind::kBool ? key.b : key.i;
        std::int64_t n = obj.kind == Kind::kList ? static_cast<std::int64_t>(obj.list->items.size())
                                                 : static_cast<std::int64_t>(cp_count(obj.s));
        if (i < 0) i += n;
        if (i < 0 || i >= n)
          return Value::undefined(object_name(obj) + " has no element " + py_str(key));
        if (obj.kind == Kind::kList) return obj.list->items[static_cast<std::size_t>(i)];
        auto offs = cp_offsets(obj.s);
        return Value::string(obj.s.substr(offs[i], offs[i + 1] - offs[i]));
      }
      break;
    }
    case Kind::kNamespace:
      if (key.kind == Kind::kString) return get_attr(obj, key.s);
      break;
    default: break;
  }
  if (key.kind == Kind::kString) {
    Value m = obj.kind == Kind::kNamespace ? Value::undefined() : builtin_method(obj, key.s);
    if (!m.is_undefined() || !m.s.empty()) return m;
    return Value::undefined(object_name(obj) + " has no attribute '" + key.s + "'");
  }
  return Value::undefined(object_name(obj) + " has no element " + py_repr(key));
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.kind == Kind::kCallable) {
    if (++call_depth_ > kMaxCallDepth) {
      --call_depth_;
      throw_invalid("maximum recursion depth exceeded");
    }
    struct Guard {
      int& d;
      ~Guard() { --d; }
    } guard{call_depth_};
    return callee.fn->fn(*this, args);
  }
  if (callee.is_undefined()) undefined_error(callee);
  throw_invalid("'" + type_name(callee) + "' object is not callable");
}

Value Interpreter::filter(const std::string& name, const Value& v, CallArgs& args) {
  return builtin_filter(*this, name, v, args);
}

bool Interpreter::test(const std::string& name, const Value& v, CallArgs& args) {
  return builtin_test(*this, name, v, args);
}

void Interpreter::args_of(const Expr& e, std::size_t first, CallArgs& out) {
  for (std::size_t k = first; k < e.args.size(); ++k) out.pos.push_back(eval(*e.args[k]));
  for (const auto& [k, v] : e.kwargs) out.kw.emplace_back(k, eval(*v));
}

Value Interpreter::eval(const Expr& e) {
  step();
  line_ = e.line;
  switch (e.kind) {
    case ExprKind::kConst: return e.value;
    case ExprKind::kName: return lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a));
      return Value::make_list(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      Value d = Value::make_dict();
      for (std::size_t k = 0; k + 1 < e.args.size(); k += 2) {
        Value key = eval(*e.args[k]);
        if (!hashable(key)) throw_invalid("unhashable type: '" + type_name(key) + "'");
        d.dict->set(key, eval(*e.args[k + 1]));
      }
      return d;
    }
    case ExprKind::kGetAttr: return get_attr(eval(*e.args[0]), e.name);
    case ExprKind::kGetItem: {
      Value obj = eval(*e.args[0]);
      Value key = eval(*e.args[1]);
      line_ = e.line;
      return get_item(obj, key);
    }
    case ExprKind::kSlice: {
      if (!e.args[0]) throw_invalid("invalid slice");
      Value obj = eval(*e.args[0]);
      Value a = e.args[1] ? eval(*e.args[1]) : Value::none();
      Value b = e.args[2] ? eval(*e.args[2]) : Value::none();
      Value c = e.args[3] ? eval(*e.args[3]) : Value::none();
      return slice(obj, a, b, c);
    }
    case ExprKind::kCall: {
      Value callee = eval(*e.args[0]);
      CallArgs args;
      args_of(e, 1, args);
      line_ = e.line;
      return call(callee, args);
    }
    case ExprKind::kFilter: {
      Value v = eval(*e.args[0]);
      CallArgs args;
      args_of(e, 1, args);
      line_ = e.line;
      return filter(e.name, v, args);
    }
    case ExprKind::kTest: {
      Value v;
      // `x is defined` must not fail on an undefined attribute chain end.
      v = eval(*e.args[0]);
      CallArgs args;
      args_of(e, 1, args);
      line_ = e.line;
      bool r = test(e.name, v, args);
      return Value::boolean(e.negated ? !r : r);
    }
    case ExprKind::kUnary: return unary_op(e.name, eval(*e.args[0]));
    case ExprKind::kBinary: {
      if (e.name == "and") {
        Value l = eval(*e.args[0]);
        return truthy(l) ? eval(*e.args[1]) : l;
      }
      if (e.name == "or") {
        Value l = eval(*e.args[0]);
        return truthy(l) ? l : eval(*e.args[1]);
      }
      Value l = eval(*e.args[0]);
      Value r = eval(*e.args[1]);
      line_ = e.line;
      return binary_op(e.name, l, r);
    }
    case ExprKind::kCompare: {
      Value left = eval(*e.args[0]);
      for (std::size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.args[k + 1]);
        line_ = e.line;
        const std::string& op = e.ops[k];
        bool r;
        if (op == "==") r = py_equal(left, right);
        else if (op == "!=") r = !py_equal(left, right);
        else if (op == "<") r = py_compare(left, right, "<") < 0;
        else if (op == ">") r = py_compare(left, right, ">") > 0;
        else if (op == "<=") r = py_compare(left, right, "<=") <= 0;
        else if (op == ">=") r = py_compare(left, right, ">=") >= 0;
        else if (op == "in") r = contains(right, left);
        else r = !contains(right, left);
        if (!r) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::kCondExpr: {
      if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    }
  }
  return Value::undefined();
}

Interpreter::Flow Interpreter::exec_body(const Body& body) {
  for (const auto& n : body) {
    Flow f = exec(*n);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

std::string Interpreter::capture(const Body& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec_body(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

Value Interpreter::apply_filters(const std::vector<ExprPtr>& filters, Value v) {
  for (const auto& f : filters) {
    CallArgs args;
    args_of(*f, 1, args);
    line_ = f->line;
    v = filter(f->name, v, args);
  }
  return v;
}

Value Interpreter::call_macro(const Node& macro, const std::shared_ptr<Frame>& closure, CallArgs& args,
                              const Value* caller) {
  auto frame = std::make_shared<Frame>();
  frame->parent = closure;
  auto saved = frame_;
  frame_ = frame;
  struct Restore {
    Interpreter& in;
    std::shared_ptr<Frame> f;
    ~Restore() { in.frame_ = f; }
  } restore{*this, saved};
  std::vector<bool> bound(macro.params.size(), false);
  std::vector<Value> varargs;
  for (std::size_t k = 0; k < args.pos.size(); ++k) {
    if (k < macro.params.size()) {
      frame->vars[macro.params[k]] = args.pos[k];
      bound[k] = true;
    } else {
      varargs.push_back(args.pos[k]);
    }
  }
  Value kwargs = Value::make_dict();
  for (const auto& [name, v] : args.kw) {
    if (name == "caller") {
      frame->vars["caller"] = v;
      continue;
    }
    auto it = std::find(macro.params.begin(), macro.params.end(), name);
    if (it == macro.params.end()) {
      kwargs.dict->set(Value::string(name), v);
      continue;
    }
    std::size_t idx = static_cast<std::size_t>(it - macro.params.begin());
    if (bound[idx]) throw_invalid("macro '" + macro.name + "' got multiple values for argument '" + name + "'");
    frame->vars[name] = v;
    bound[idx] = true;
  }
  for (std::size_t k = 0; k < macro.params.size(); ++k) {
    if (bound[k]) continue;
    if (macro.defaults[k])
      frame->vars[macro.params[k]] = eval(*macro.defaults[k]);
    else
      frame->vars[macro.params[k]] = Value::undefined("parameter '" + macro.params[k] + "' was not provided");
  }
  frame->vars["varargs"] = Value::make_list(std::move(varargs), true);
  frame->vars["kwargs"] = kwargs;
  if (caller) frame->vars["caller"] = *caller;
  return Value::string(capture(macro.body));
}

Interpreter::Flow Interpreter::exec_for(const Node& n) {
  Value iterable = eval(*n.expr);
  std::vector<Value> items = iterate(iterable);
  auto outer = frame_;
  struct Restore {
    Interpreter& in;
    std::shared_ptr<Frame> f;
    ~Restore() { in.frame_ = f; }
  } restore{*this, outer};
  if (n.cond) {
    std::vector<Value> kept;
    for (auto& item : items) {
      auto f = std::make_shared<Frame>();
      f->parent = outer;
      frame_ = f;
      unpack(n.targets, item);
      if (truthy(eval(*n.cond))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
    frame_ = outer;
  }
  const std::int64_t len = static_cast<std::int64_t>(items.size());
  for (std::int64_t k = 0; k < len; ++k) {
    step();
    auto f = std::make_shared<Frame>();
    f->parent = outer;
    frame_ = f;
    Value loop = Value::make_namespace("LoopContext", true);
    auto& a = loop.ns->attrs.items;
    a.reserve(12);
    auto put = [&](const char* key, Value v) { a.emplace_back(Value::string(key), std::move(v)); };
    put("index", Value::integer(k + 1));
    put("index0", Value::integer(k));
    put("revindex", Value::integer(len - k));
    put("revindex0", Value::integer(len - k - 1));
    put("first", Value::boolean(k == 0));
    put("last", Value::boolean(k == len - 1));
    put("length", Value::integer(len));
    put("depth", Value::integer(1));
    put("depth0", Value::integer(0));
    put("previtem", k > 0 ? items[k - 1] : Value::undefined("there is no previous item"));
    put("nextitem", k + 1 < len ? items[k + 1] : Value::undefined("there is no next item"));
    std::int64_t idx = k;
    put("cycle", Value::callable("cycle", [idx](Interpreter&, CallArgs& ca) {
          if (ca.pos.empty()) throw_invalid("no items for cycling given");
          return ca.pos[static_cast<std::size_t>(idx) % ca.pos.size()];
        }));
    f->vars["loop"] = loop;
    unpack(n.targets, items[k]);
    Flow fl = exec_body(n.body);
    if (fl == Flow::kBreak) break;
  }
  frame_ = outer;
  if (len == 0) return exec_body(n.else_body);
  return Flow::kNormal;
}

void Interpreter::exec_set(const Node& n) {
  Value v;
  if (n.expr) {
    v = eval(*n.expr);
  } else {
    v = apply_filters(n.filters, Value::string(capture(n.body)));
  }
  line_ = n.line;
  if (!n.attr.empty()) {
    Value target = lookup(n.targets[0]);
    if (target.kind != Kind::kNamespace || target.ns->read_only)
      throw_invalid("cannot assign attribute on non-namespace object");
    target.ns->attrs.set(Value::string(n.attr), std::move(v));
    return;
  }
  unpack(n.targets, v);
}

Interpreter::Flow Interpreter::exec(const Node& n) {
  step();
  line_ = n.line;
  switch (n.kind) {
    case NodeKind::kText: write(n.text); return Flow::kNormal;
    case NodeKind::kOutput: {
      Value v = eval(*n.expr);
      if (v.kind == Kind::kString)
        write(v.s);
      else
        write(py_str(v));
      return Flow::kNormal;
    }
    case NodeKind::kIf:
      for (std::size_t k = 0; k < n.conds.size(); ++k)
        if (truthy(eval(*n.conds[k]))) return exec_body(n.bodies[k]);
      return exec_body(n.else_body);
    case NodeKind::kFor: return exec_for(n);
    case NodeKind::kSet: exec_set(n); return Flow::kNormal;
    case NodeKind::kMacro: {
      const Node* macro = &n;
      std::weak_ptr<Frame> weak = frame_;
      // Holding the defining frame strongly would make a cycle (the frame
      // stores the macro); the interpreter keeps frames alive while they run.
      Value fn = Value::callable(n.name, [macro, weak](Interpreter& in, CallArgs& args) {
        auto f = weak.lock();
        if (!f) throw_invalid("macro '" + macro->name + "' called outside of its scope");
        return in.call_macro(*macro, f, args, nullptr);
      });
      assign(n.name, fn);
      return Flow::kNormal;
    }
    case NodeKind::kCallBlock: {
      const Node* block = &n;
      std::weak_ptr<Frame> weak = frame_;
      Value caller = Value::callable("caller", [block, weak](Interpreter& in, CallArgs& args) {
        auto f = weak.lock();
        if (!f) throw_invalid("caller called outside of its scope");
        return in.call_macro(*block, f, args, nullptr);
      });
      const Expr& call_expr = *n.expr;
      Value callee = eval(*call_expr.args[0]);
      CallArgs args;
      args_of(call_expr, 1, args);
      args.kw.emplace_back("caller", caller);
      line_ = n.line;
      write(py_str(call(callee, args)));
      return Flow::kNormal;
    }
    case NodeKind::kBreak: return Flow::kBreak;
    case NodeKind::kContinue: return Flow::kContinue;
    case NodeKind::kFilterBlock: {
      Value v = apply_filters(n.filters, Value::string(capture(n.body)));
      write(py_str(v));
      return Flow::kNormal;
    }
    case NodeKind::kWith: {
      auto outer = frame_;
      auto f = std::make_shared<Frame>();
      f->parent = outer;
      for (std::size_t k = 0; k < n.targets.size(); ++k) f->vars[n.targets[k]] = eval(*n.values[k]);
      frame_ = f;
      Flow fl;
      try {
        fl = exec_body(n.body);
      } catch (...) {
        frame_ = outer;
        throw;
      }
      frame_ = outer;
      return fl;
    }
    case NodeKind::kGeneration: return exec_body(n.body);
  }
  return Flow::kNormal;
}

}  // namespace hipformers::chat
