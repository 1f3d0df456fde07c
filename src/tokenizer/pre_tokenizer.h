// tokenizer.json "pre_tokenizer": splits normalized text into words that the
// model tokenizes independently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "json_fields.h"

namespace hipformers::tok {

struct Piece {
  std::string text;
  // True when the piece starts at offset 0 of the original input (Metaspace
  // prepend_scheme "first" only prepends there).
  bool at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their splits; empty pieces are dropped, as in HF.
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonField& field);

}  // namespace hipformers::tok
