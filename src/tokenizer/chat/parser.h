// Recursive-descent parser for the Jinja subset (jinja2's grammar and operator
// precedence). Nesting is bounded so that evaluation cannot overflow the stack.
#pragma once

#include <string>
#include <vector>

#include "ast.h"
#include "lexer.h"

namespace hipformers::chat {

inline constexpr int kMaxExprDepth = 200;
inline constexpr int kMaxBlockDepth = 100;

// Throws Error("<name> line L, column C: ...") on syntax errors and on
// unsupported tags.
Body parse_template(std::vector<Token> tokens, const std::string& name);

}  // namespace hipformers::chat
