#include "post_processor.h"

namespace hipformers::tok {
namespace {

class WrappingProcessor final : public PostProcessor {
 public:
  WrappingProcessor(std::vector<std::int32_t> prefix, std::vector<std::int32_t> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}
  void process(std::vector<std::int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
    ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  }

 private:
  std::vector<std::int32_t> prefix_, suffix_;
};

// ByteLevel only trims offsets; ids are unchanged.
class IdentityProcessor final : public PostProcessor {
 public:
  void process(std::vector<std::int32_t>&, bool) const override {}
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<std::int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& p : parts_) p->process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

// TemplateProcessing "single": a list of {"SpecialToken": {"id": name}} and
// {"Sequence": {"id": "A"}} items; special token names resolve through
// "special_tokens": {name: {"ids": [...]}}.
std::unique_ptr<PostProcessor> make_template(const JsonField& field) {
  JsonField single = field.at("single");
  std::optional<JsonField> specials = field.get("special_tokens");
  std::vector<std::int32_t> prefix, suffix;
  bool seen_sequence = false;
  for (std::size_t i = 0; i < single.array().size(); ++i) {
    JsonField item = single.index(i);
    if (auto seq = item.get("Sequence")) {
      if (seen_sequence) seq->fail("the single template holds more than one sequence");
      seen_sequence = true;
      continue;
    }
    if (auto sp = item.get("SpecialToken")) {
      std::string name = sp->at("id").str();
      if (!specials || !specials->json().contains(name)) sp->fail("special token '" + name + "' is not in special_tokens");
      JsonField entry = specials->at(name.c_str());
      JsonField ids = entry.at("ids");
      auto& target = seen_sequence ? suffix : prefix;
      for (std::size_t k = 0; k < ids.array().size(); ++k) {
        std::int64_t id = ids.index(k).integer();
        if (id < 0 || id > INT32_MAX) ids.index(k).fail("token id out of range");
        target.push_back(static_cast<std::int32_t>(id));
      }
      continue;
    }
    item.fail("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
  }
  return make_wrapping_processor(std::move(prefix), std::move(suffix));
}

std::int32_t pair_id(const JsonField& pair) {
  if (pair.array().size() != 2) pair.fail("expected [token, id]");
  std::int64_t id = pair.index(1).integer();
  if (id < 0 || id > INT32_MAX) pair.index(1).fail("token id out of range");
  return static_cast<std::int32_t>(id);
}

}  // namespace

std::unique_ptr<PostProcessor> make_wrapping_processor(std::vector<std::int32_t> prefix,
                                                       std::vector<std::int32_t> suffix) {
  return std::make_unique<WrappingProcessor>(std::move(prefix), std::move(suffix));
}

std::unique_ptr<PostProcessor> make_post_processor(const JsonField& field) {
  NestingGuard guard(field);
  if (field.is_null()) return nullptr;
  const std::string type = field.type_name();
  if (type == "ByteLevel") return std::make_unique<IdentityProcessor>();
  if (type == "TemplateProcessing") return make_template(field);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    return make_wrapping_processor({pair_id(field.at("cls"))}, {pair_id(field.at("sep"))});
  }
  if (type == "Sequence") {
    JsonField list = field.at("processors");
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (std::size_t i = 0; i < list.array().size(); ++i) {
      auto p = make_post_processor(list.index(i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceProcessor>(std::move(parts));
  }
  field.at("type").fail("unsupported post_processor type '" + type +
                        "' (supported: ByteLevel, TemplateProcessing, BertProcessing, RobertaProcessing, Sequence)");
}

}  // namespace hipformers::tok
