// jinja2's built-in filters and tests, Python str/dict/list methods, and the
// globals of Transformers' chat-template environment (range, dict, namespace,
// raise_exception, strftime_now).
#pragma once

#include <string>

#include "interpreter.h"
#include "value.h"

namespace hipformers::chat {

bool has_filter(const std::string& name);
bool has_test(const std::string& name);
Value builtin_filter(Interpreter& in, const std::string& name, const Value& v, CallArgs& args);
bool builtin_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args);
// obj.name for str/list/dict methods and the loop object; Undefined if none
// (mutating methods give an Undefined whose use reports the sandbox error).
Value builtin_method(const Value& obj, const std::string& name);
void install_globals(Frame& globals);

// Argument helpers shared with the interpreter.
const Value* arg(const CallArgs& a, std::size_t pos, const char* name);

}  // namespace hipformers::chat
