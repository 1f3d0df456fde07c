// tokenizer.json "normalizer": text -> normalized text, applied to each piece
// of the input left between added tokens.
#pragma once

#include <memory>
#include <string>

#include "json_fields.h"
#include "regex.h"

namespace hipformers::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// Builds the normalizer described by `field` (null -> nullptr). Unknown types
// throw naming the supported ones.
std::unique_ptr<Normalizer> make_normalizer(const JsonField& field);

// {"String": s} (a literal) or {"Regex": r}; shared by Split, Replace, ...
Pattern make_pattern(const JsonField& field);

}  // namespace hipformers::tok
