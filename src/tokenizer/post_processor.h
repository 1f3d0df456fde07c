// tokenizer.json "post_processor": adds special tokens around an encoded
// single sequence (pairs are not part of our API).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "json_fields.h"

namespace hipformers::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<std::int32_t>& ids, bool add_special_tokens) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const JsonField& field);

// Wraps ids as [prefix..., ids..., suffix...] when add_special_tokens (also
// used for Transformers' add_bos_token / add_eos_token override).
std::unique_ptr<PostProcessor> make_wrapping_processor(std::vector<std::int32_t> prefix,
                                                       std::vector<std::int32_t> suffix);

}  // namespace hipformers::tok
