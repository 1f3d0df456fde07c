// Python str semantics on UTF-8 strings (indices count code points).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hipformers::chat {

// Byte offsets of each code point plus a final s.size().
std::vector<std::size_t> cp_offsets(std::string_view s);
std::size_t cp_count(std::string_view s);
bool py_isspace(char32_t c);

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()
std::string jinja_title(std::string_view s);    // jinja2's |title filter
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, std::int64_t count);
std::int64_t py_count(std::string_view s, std::string_view sub);
// Code-point index of the first (or last) occurrence, -1 if absent.
std::int64_t py_find(std::string_view s, std::string_view sub, bool reverse);
bool py_is_upper(std::string_view s);
bool py_is_lower(std::string_view s);

}  // namespace hipformers::chat
