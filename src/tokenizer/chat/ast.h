// Syntax tree of a parsed chat template.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "value.h"

namespace hipformers::chat {

enum class ExprKind : std::uint8_t {
  kConst,      // value
  kName,       // name
  kList,       // args
  kTuple,      // args
  kDict,       // args = k0, v0, k1, v1...
  kGetAttr,    // args[0] . name
  kGetItem,    // args[0] [ args[1] ]
  kSlice,      // args[0] [ args[1] : args[2] : args[3] ] (null = omitted)
  kCall,       // args[0] ( args[1..], kwargs )
  kFilter,     // args[0] | name ( args[1..], kwargs ); args[0] null inside {% filter %}
  kTest,       // args[0] is [not] name ( args[1..], kwargs )
  kUnary,      // name in {"-", "+", "not"}
  kBinary,     // name in {"+","-","*","/","//","%","**","~","and","or"}
  kCompare,    // args[0] (ops[k] args[k+1])*
  kCondExpr,   // args[1] if args[0] else args[2] (args[2] may be null)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  int depth = 1;  // height of this subtree (bounded by the parser)
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

enum class NodeKind : std::uint8_t {
  kText,        // text
  kOutput,      // expr
  kIf,          // conds[k] -> bodies[k]; else_body
  kFor,         // targets in expr [if cond] body / else_body
  kSet,         // targets (or attr target) = expr ; or block set with body and filters
  kMacro,       // name(params=defaults) body
  kCallBlock,   // {% call(params) expr %} body
  kBreak,
  kContinue,
  kFilterBlock, // filters applied to rendered body
  kWith,        // assignments, body
  kGeneration,  // body rendered as-is
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  NodeKind kind = NodeKind::kText;
  int line = 0;
  std::string text;
  ExprPtr expr;  // output / for iterable / set value / call expr
  ExprPtr cond;  // for filter
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  std::vector<std::string> targets;  // names for for/set/with
  std::string attr;                  // set ns.attr: targets[0] = ns, attr = attr
  std::vector<ExprPtr> filters;      // block set / filter block: kFilter exprs with null args[0]
  std::string name;                  // macro name
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;     // parallel to params (null = required)
  std::vector<ExprPtr> values;       // with: values parallel to targets
};

}  // namespace hipformers::chat
