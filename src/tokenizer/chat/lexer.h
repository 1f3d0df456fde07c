// Tokenizer of the Jinja subset: splits a template into data, `{{ }}` and
// `{% %}` regions (comments dropped) with jinja2's whitespace control under
// trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, and lexes
// the expressions inside tags into names, literals and operators.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hipformers::chat {

enum class Tok : std::uint8_t {
  kData,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEof,
};

struct Token {
  Tok type = Tok::kEof;
  std::string text;  // data, name, operator or decoded string literal
  std::int64_t ival = 0;
  double fval = 0.0;
  int line = 1;
  int col = 1;
};

// Throws Error("<name> line L, column C: ...") on lexical errors.
std::vector<Token> lex(std::string_view source, const std::string& name);

// Decodes the body of a Python string literal (unicode-escape rules). Exposed for tests.
std::string decode_string_literal(std::string_view body, const std::string& where);

const char* token_type_name(Tok t);

}  // namespace hipformers::chat
