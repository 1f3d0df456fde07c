// JSON parsing with errors that name the file (nlohmann-json underneath).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hipformers {

using Json = nlohmann::json;
// Keeps the key order of the document; chat templates iterate objects in the
// order the user wrote them, as Python dicts do.
using OrderedJson = nlohmann::ordered_json;

// Parses `text`; on failure throws Error(kInvalidInput) "<what>: invalid JSON: ...".
Json parse_json(std::string_view text, const std::string& what);
OrderedJson parse_ordered_json(std::string_view text, const std::string& what);

// Reads and parses a file; a missing file is Error(kNotFound) naming the path.
Json read_json_file(const std::filesystem::path& path);
OrderedJson read_ordered_json_file(const std::filesystem::path& path);

}  // namespace hipformers
