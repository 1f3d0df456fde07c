#include "parser.h"

#include <algorithm>
#include <initializer_list>

#include "hipformers/core/error.h"

namespace hipformers::chat {

namespace {

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name) : toks_(std::move(tokens)), name_(name) {}

  Body run() {
    std::string end;
    Body body = parse_body({}, &end);
    return body;
  }

 private:
  // ---- token helpers -------------------------------------------------------
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(std::size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::kName && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  std::string describe(const Token& t) const {
    switch (t.type) {
      case Tok::kName: return "'" + t.text + "'";
      case Tok::kOp: return "'" + t.text + "'";
      case Tok::kString: return "string literal";
      case Tok::kInt:
      case Tok::kFloat: return "number";
      default: return token_type_name(t.type);
    }
  }

  [[noreturn]] void fail_at(const Token& t, const std::string& msg) const {
    throw_invalid(name_ + " line " + std::to_string(t.line) + ", column " + std::to_string(t.col) + ": " + msg);
  }
  [[noreturn]] void fail(const std::string& msg) const { fail_at(cur(), msg); }
  [[noreturn]] void unexpected(const std::string& expected) const {
    fail("unexpected " + describe(cur()) + (expected.empty() ? "" : ", expected " + expected));
  }

  void expect_op(const char* op) {
    if (!skip_op(op)) unexpected(std::string("'") + op + "'");
  }
  std::string expect_name() {
    if (cur().type != Tok::kName) unexpected("a name");
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Tok::kBlockEnd) unexpected("end of statement block '%}'");
    next();
  }

  struct DepthGuard {
    DepthGuard(Parser& p, int& counter, int limit) : counter_(counter) {
      if (++counter_ > limit) p.fail("template nested too deeply");
    }
    ~DepthGuard() { --counter_; }
    int& counter_;
  };

  // ---- expression construction --------------------------------------------
  ExprPtr make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  ExprPtr finish(ExprPtr e) {
    int d = 0;
    for (const auto& a : e->args)
      if (a) d = std::max(d, a->depth);
    for (const auto& kv : e->kwargs)
      if (kv.second) d = std::max(d, kv.second->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) fail("expression nested too deeply");
    return e;
  }
  ExprPtr unary(ExprKind kind, const std::string& op, ExprPtr a, int line) {
    auto e = make(kind, line);
    e->name = op;
    e->args.push_back(std::move(a));
    return finish(std::move(e));
  }
  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b, int line) {
    auto e = make(ExprKind::kBinary, line);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return finish(std::move(e));
  }

  // ---- expressions (jinja2 precedence) -------------------------------------
  ExprPtr parse_expression(bool with_condexpr = true) {
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    DepthGuard g(*this, expr_depth_, kMaxExprDepth);
    int line = cur().line;
    ExprPtr expr1 = parse_or();
    while (is_name("if")) {
      next();
      ExprPtr cond = parse_or();
      ExprPtr expr3;
      if (skip_name("else")) expr3 = parse_condexpr();
      auto e = make(ExprKind::kCondExpr, line);
      e->args.push_back(std::move(cond));
      e->args.push_back(std::move(expr1));
      e->args.push_back(std::move(expr3));
      expr1 = finish(std::move(e));
    }
    return expr1;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      int line = cur().line;
      next();
      left = binary("or", std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      int line = cur().line;
      next();
      left = binary("and", std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this, expr_depth_, kMaxExprDepth);
      int line = cur().line;
      next();
      return unary(ExprKind::kUnary, "not", parse_not(), line);
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == Tok::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                     cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == Tok::kName && peek().text == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(ExprKind::kCompare, line);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
      if (cmp->args.size() > 64) fail("comparison chain too long");
    }
    if (!cmp) return first;
    return finish(std::move(cmp));
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      int line = cur().line;
      next();
      left = binary(op, std::move(left), parse_concat(), line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      int line = cur().line;
      next();
      left = binary("~", std::move(left), parse_math2(), line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      int line = cur().line;
      next();
      left = binary(op, std::move(left), parse_pow(), line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      int line = cur().line;
      next();
      left = binary("**", std::move(left), parse_unary(true), line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard g(*this, expr_depth_, kMaxExprDepth);
    int line = cur().line;
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      std::string op = cur().text;
      next();
      node = unary(ExprKind::kUnary, op, parse_unary(false), line);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    if (t.type == Tok::kName) {
      std::string n = t.text;
      next();
      auto e = make(ExprKind::kConst, line);
      if (n == "true" || n == "True") {
        e->value = Value::boolean(true);
      } else if (n == "false" || n == "False") {
        e->value = Value::boolean(false);
      } else if (n == "none" || n == "None") {
        e->value = Value::none();
      } else {
        e->kind = ExprKind::kName;
        e->name = n;
      }
      return finish(std::move(e));
    }
    if (t.type == Tok::kString) {
      std::string s = t.text;
      next();
      while (cur().type == Tok::kString) {
        s += cur().text;
        if (s.size() > kMaxStringBytes) fail("string literal too large");
        next();
      }
      auto e = make(ExprKind::kConst, line);
      e->value = Value::string(std::move(s));
      return finish(std::move(e));
    }
    if (t.type == Tok::kInt || t.type == Tok::kFloat) {
      auto e = make(ExprKind::kConst, line);
      e->value = t.type == Tok::kInt ? Value::integer(t.ival) : Value::number(t.fval);
      next();
      return finish(std::move(e));
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = make(ExprKind::kList, line);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression());
      }
      expect_op("]");
      return finish(std::move(e));
    }
    if (is_op("{")) {
      next();
      auto e = make(ExprKind::kDict, line);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression());
        expect_op(":");
        e->args.push_back(parse_expression());
      }
      expect_op("}");
      return finish(std::move(e));
    }
    unexpected("an expression");
  }

  bool is_tuple_end(std::initializer_list<const char*> extra_end_names) const {
    if (cur().type == Tok::kVarEnd || cur().type == Tok::kBlockEnd || cur().type == Tok::kEof) return true;
    if (is_op(")")) return true;
    for (const char* n : extra_end_names)
      if (is_name(n)) return true;
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens,
                      std::initializer_list<const char*> extra_end_names = {}) {
    int line = cur().line;
    auto tup = make(ExprKind::kTuple, line);
    bool is_tuple = false;
    while (true) {
      if (!tup->args.empty()) expect_op(",");
      if (is_tuple_end(extra_end_names)) break;
      tup->args.push_back(parse_expression(with_condexpr));
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!tup->args.empty()) return std::move(tup->args[0]);
      if (!explicit_parens) unexpected("an expression");
    }
    return finish(std::move(tup));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        break;
      }
    }
    return node;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        break;
      }
    }
    return node;
  }

  ExprPtr parse_subscript(ExprPtr node) {
    int line = cur().line;
    if (skip_op(".")) {
      if (cur().type == Tok::kName) {
        auto e = make(ExprKind::kGetAttr, line);
        e->name = cur().text;
        next();
        e->args.push_back(std::move(node));
        return finish(std::move(e));
      }
      if (cur().type == Tok::kInt) {
        auto e = make(ExprKind::kGetItem, line);
        auto idx = make(ExprKind::kConst, line);
        idx->value = Value::integer(cur().ival);
        next();
        e->args.push_back(std::move(node));
        e->args.push_back(finish(std::move(idx)));
        return finish(std::move(e));
      }
      unexpected("an attribute name");
    }
    expect_op("[");
    std::vector<ExprPtr> items;
    while (!is_op("]")) {
      if (!items.empty()) {
        expect_op(",");
        if (is_op("]")) break;
      }
      items.push_back(parse_subscribed());
    }
    expect_op("]");
    if (items.empty()) fail("empty subscript");
    if (items.size() > 1)
      for (const auto& it : items)
        if (it->kind == ExprKind::kSlice) fail("unsupported syntax: multi-dimensional slice");
    ExprPtr index;
    if (items.size() == 1) {
      index = std::move(items[0]);
    } else {
      auto t = make(ExprKind::kTuple, line);
      t->args = std::move(items);
      index = finish(std::move(t));
    }
    if (index->kind == ExprKind::kSlice && index->args[0] == nullptr) {
      index->args[0] = std::move(node);
      return finish(std::move(index));
    }
    auto e = make(ExprKind::kGetItem, line);
    e->args.push_back(std::move(node));
    e->args.push_back(std::move(index));
    return finish(std::move(e));
  }

  // Returns a kSlice with args[0] empty (filled by the caller) or an expression.
  ExprPtr parse_subscribed() {
    int line = cur().line;
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression();
      if (!is_op(":")) return start;
    }
    next();  // ':'
    auto s = make(ExprKind::kSlice, line);
    s->args.resize(4);
    s->args[1] = std::move(start);
    if (!is_op(":") && !is_op("]") && !is_op(",")) s->args[2] = parse_expression();
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) s->args[3] = parse_expression();
    }
    return s;  // finished by parse_subscript
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        expect_op(",");
        if (is_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**")) fail("unsupported syntax: *args / **kwargs in calls");
      if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        e.kwargs.emplace_back(key, parse_expression());
      } else {
        if (!e.kwargs.empty()) fail("positional argument follows keyword argument");
        e.args.push_back(parse_expression());
      }
      if (e.args.size() + e.kwargs.size() > 256) fail("too many arguments");
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(ExprKind::kCall, cur().line);
    e->args.push_back(std::move(node));
    parse_call_args(*e);
    return finish(std::move(e));
  }

  std::string parse_dotted_name() {
    std::string n = expect_name();
    while (is_op(".")) {
      next();
      n += "." + expect_name();
    }
    return n;
  }

  ExprPtr parse_filter(ExprPtr node) {
    while (is_op("|")) {
      int line = cur().line;
      next();
      auto e = make(ExprKind::kFilter, line);
      e->name = parse_dotted_name();
      e->args.push_back(std::move(node));
      if (is_op("(")) parse_call_args(*e);
      node = finish(std::move(e));
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = cur().line;
    next();  // is
    bool negated = skip_name("not");
    auto e = make(ExprKind::kTest, line);
    e->name = parse_dotted_name();
    e->negated = negated;
    e->args.push_back(std::move(node));
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().type == Tok::kName || cur().type == Tok::kString || cur().type == Tok::kInt ||
                cur().type == Tok::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("you cannot chain multiple tests with is");
      ExprPtr arg = parse_postfix(parse_primary());
      e->args.push_back(std::move(arg));
    }
    return finish(std::move(e));
  }

  // ---- statements -----------------------------------------------------------
  // Parses nodes until a {% tag %} whose name is in `end_tags`; leaves the
  // stream on that name (after '{%') and stores it in *found.
  Body parse_body(std::initializer_list<const char*> end_tags, std::string* found) {
    DepthGuard g(*this, block_depth_, kMaxBlockDepth);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::kEof) {
        if (end_tags.size() == 0) {
          *found = "";
          return body;
        }
        std::string names;
        for (const char* n : end_tags) names += std::string(names.empty() ? "" : " or ") + "'" + n + "'";
        fail("unexpected end of template, expected " + names);
      }
      if (t.type == Tok::kData) {
        auto n = std::make_unique<Node>();
        n->kind = NodeKind::kText;
        n->line = t.line;
        n->text = t.text;
        body.push_back(std::move(n));
        next();
        continue;
      }
      if (t.type == Tok::kVarBegin) {
        auto n = std::make_unique<Node>();
        n->kind = NodeKind::kOutput;
        n->line = t.line;
        next();
        n->expr = parse_tuple(true, false);
        if (cur().type != Tok::kVarEnd) unexpected("end of print statement '}}'");
        next();
        body.push_back(std::move(n));
        continue;
      }
      if (t.type == Tok::kBlockBegin) {
        next();
        if (cur().type != Tok::kName) unexpected("a tag name");
        for (const char* n : end_tags) {
          if (cur().text == n) {
            *found = n;
            return body;
          }
        }
        body.push_back(parse_statement());
        continue;
      }
      unexpected("");
    }
  }

  NodePtr parse_statement() {
    const Token& t = cur();
    std::string tag = t.text;
    int line = t.line;
    auto n = std::make_unique<Node>();
    n->line = line;
    if (tag == "if") {
      next();
      n->kind = NodeKind::kIf;
      n->conds.push_back(parse_tuple(false, false));
      expect_block_end();
      while (true) {
        std::string found;
        n->bodies.push_back(parse_body({"elif", "else", "endif"}, &found));
        next();
        if (found == "elif") {
          n->conds.push_back(parse_tuple(false, false));
          expect_block_end();
          continue;
        }
        if (found == "else") {
          expect_block_end();
          n->else_body = parse_body({"endif"}, &found);
          next();
        }
        break;
      }
      expect_block_end();
      return n;
    }
    if (tag == "for") {
      next();
      n->kind = NodeKind::kFor;
      n->targets = parse_assign_names();
      if (!skip_name("in")) unexpected("'in'");
      n->expr = parse_tuple(false, false, {"recursive"});
      if (skip_name("if")) n->cond = parse_expression();
      if (is_name("recursive")) fail("unsupported syntax: recursive loops");
      expect_block_end();
      ++loop_depth_;
      std::string found;
      n->body = parse_body({"endfor", "else"}, &found);
      --loop_depth_;
      next();
      if (found == "else") {
        expect_block_end();
        n->else_body = parse_body({"endfor"}, &found);
        next();
      }
      expect_block_end();
      return n;
    }
    if (tag == "set") {
      next();
      n->kind = NodeKind::kSet;
      if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == ".") {
        n->targets.push_back(cur().text);
        next();
        next();
        n->attr = expect_name();
      } else {
        n->targets = parse_assign_names();
      }
      if (skip_op("=")) {
        n->expr = parse_tuple(true, false);
        expect_block_end();
        return n;
      }
      if (!n->attr.empty() || n->targets.size() != 1) unexpected("'='");
      parse_filter_chain(*n);
      expect_block_end();
      std::string found;
      n->body = parse_body({"endset"}, &found);
      next();
      expect_block_end();
      return n;
    }
    if (tag == "macro") {
      next();
      n->kind = NodeKind::kMacro;
      n->name = expect_name();
      parse_signature(*n);
      expect_block_end();
      std::string found;
      int saved = loop_depth_;
      loop_depth_ = 0;
      n->body = parse_body({"endmacro"}, &found);
      loop_depth_ = saved;
      next();
      if (cur().type == Tok::kName) next();  // optional macro name
      expect_block_end();
      return n;
    }
    if (tag == "call") {
      next();
      n->kind = NodeKind::kCallBlock;
      if (is_op("(")) parse_signature(*n);
      n->expr = parse_expression();
      if (n->expr->kind != ExprKind::kCall) fail("expected a call in the call block");
      expect_block_end();
      std::string found;
      n->body = parse_body({"endcall"}, &found);
      next();
      expect_block_end();
      return n;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop");
      next();
      n->kind = tag == "break" ? NodeKind::kBreak : NodeKind::kContinue;
      expect_block_end();
      return n;
    }
    if (tag == "filter") {
      next();
      n->kind = NodeKind::kFilterBlock;
      parse_filter_chain(*n);
      if (n->filters.empty()) unexpected("a filter name");
      expect_block_end();
      std::string found;
      n->body = parse_body({"endfilter"}, &found);
      next();
      expect_block_end();
      return n;
    }
    if (tag == "with") {
      next();
      n->kind = NodeKind::kWith;
      while (cur().type != Tok::kBlockEnd) {
        if (!n->targets.empty()) expect_op(",");
        n->targets.push_back(expect_name());
        expect_op("=");
        n->values.push_back(parse_expression());
      }
      expect_block_end();
      std::string found;
      n->body = parse_body({"endwith"}, &found);
      next();
      expect_block_end();
      return n;
    }
    if (tag == "generation") {
      next();
      n->kind = NodeKind::kGeneration;
      expect_block_end();
      std::string found;
      n->body = parse_body({"endgeneration"}, &found);
      next();
      expect_block_end();
      return n;
    }
    static const char* const kEndTags[] = {"endif",     "endfor",  "else",    "elif",          "endset",
                                           "endmacro",  "endcall", "endwith", "endgeneration", "endfilter",
                                           "endraw",    "endblock"};
    for (const char* e : kEndTags)
      if (tag == e) fail("unexpected tag '" + tag + "'");
    fail("unsupported tag '" + tag + "'");
  }

  void parse_filter_chain(Node& n) {
    while (is_op("|") || (n.kind == NodeKind::kFilterBlock && n.filters.empty() && cur().type == Tok::kName)) {
      skip_op("|");
      int line = cur().line;
      auto e = make(ExprKind::kFilter, line);
      e->name = parse_dotted_name();
      e->args.push_back(nullptr);
      if (is_op("(")) parse_call_args(*e);
      n.filters.push_back(finish(std::move(e)));
    }
  }

  void parse_signature(Node& n) {
    expect_op("(");
    while (!is_op(")")) {
      if (!n.params.empty()) {
        expect_op(",");
        if (is_op(")")) break;
      }
      n.params.push_back(expect_name());
      if (skip_op("=")) {
        n.defaults.push_back(parse_expression());
      } else {
        if (!n.defaults.empty() && n.defaults.back()) fail("non-default argument follows default argument");
        n.defaults.push_back(nullptr);
      }
      if (n.params.size() > 64) fail("too many parameters");
    }
    expect_op(")");
  }

  std::vector<std::string> parse_assign_names() {
    std::vector<std::string> names;
    bool paren = skip_op("(");
    while (true) {
      names.push_back(expect_name());
      if (names.size() > 64) fail("too many assignment targets");
      if (!skip_op(",")) break;
      if (paren ? is_op(")") : (is_name("in") || is_op("="))) break;
    }
    if (paren) expect_op(")");
    return names;
  }

  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  const std::string& name_;
  int expr_depth_ = 0;
  int block_depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::vector<Token> tokens, const std::string& name) {
  return Parser(std::move(tokens), name).run();
}

}  // namespace hipformers::chat
