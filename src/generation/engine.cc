#include "hipformers/generation/engine.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "hipformers/core/error.h"
#include "hipformers/kernels/step_trace.h"

namespace hipformers {

Engine::Engine(const CausalLM& model, const EngineOptions& options) : model_(model), options_(options) {
  const ModelConfig& c = model.config();
  if (!model.supports_batched_steps())
    throw_error(ErrorKind::kUnsupported,
                "batched generation does not run the eager attention backend (use sdpa or a flash backend)");
  if (options_.max_batch <= 0) throw_invalid("max_batch must be positive");
  if (options_.max_prefill_tokens <= 0) throw_invalid("max_prefill_tokens must be positive");
  if (const char* v = std::getenv("HIPFORMERS_DISABLE_GRAPHS"); v && *v && *v != '0') options_.use_graphs = false;
  if (options_.max_seq_len <= 0) options_.max_seq_len = c.max_position_embeddings;
  options_.max_seq_len = std::min(options_.max_seq_len, c.max_position_embeddings);
  const int64_t per_seq = PagedKVCache::pages_for(options_.max_seq_len);
  if (options_.kv_pages <= 0) options_.kv_pages = options_.max_batch * per_seq;
  cache_ = std::make_unique<PagedKVCache>(model, options_.kv_pages);
  workspace_ = std::make_unique<StepWorkspace>(model, std::max(options_.max_prefill_tokens, options_.max_batch),
                                               options_.max_batch, options_.max_seq_len);
  for (auto& slot : ids_)
    slot = std::make_unique<HostStaging>(model.device(), static_cast<std::size_t>(options_.max_batch) * sizeof(int32_t));
  lookahead_enabled_ = options_.lookahead == EngineOptions::Lookahead::kOn ||
                       (options_.lookahead == EngineOptions::Lookahead::kAuto && model.device().is_gpu());
  if (const char* v = std::getenv("HIPFORMERS_DISABLE_LOOKAHEAD");
      v && *v && *v != '0' && options_.lookahead == EngineOptions::Lookahead::kAuto)
    lookahead_enabled_ = false;
}

int64_t Engine::add(std::span<const int32_t> prompt, int64_t max_new_tokens) {
  const ModelConfig& c = model_.config();
  const auto id = static_cast<int64_t>(sequences_.size());
  const std::string which = "prompt " + std::to_string(id);
  if (prompt.empty()) throw_invalid(which + " is empty");
  if (max_new_tokens < 1) throw_invalid(which + ": max_new_tokens must be >= 1 for the engine");
  for (std::size_t t = 0; t < prompt.size(); ++t)
    if (prompt[t] < 0 || prompt[t] >= c.vocab_size)
      throw_invalid("token id " + std::to_string(prompt[t]) + " at position " + std::to_string(t) + " of " +
                    which + " is out of range for the model's vocabulary of " + std::to_string(c.vocab_size));
  const int64_t max_len = static_cast<int64_t>(prompt.size()) + max_new_tokens;
  if (max_len > options_.max_seq_len)
    throw_invalid(which + " needs " + std::to_string(max_len) + " positions, more than the engine's max_seq_len (" +
                  std::to_string(options_.max_seq_len) + ")");
  if (PagedKVCache::pages_for(max_len) > cache_->num_pages())
    throw_error(ErrorKind::kOutOfMemory, which + " needs " + std::to_string(PagedKVCache::pages_for(max_len)) +
                                             " KV cache pages, the cache has " +
                                             std::to_string(cache_->num_pages()));
  Sequence s;
  s.tokens.assign(prompt.begin(), prompt.end());
  s.max_len = max_len;
  sequences_.push_back(std::move(s));
  waiting_.push_back(id);
  return id;
}

// FIFO: the first waiting sequence joins when the batch has room and the
// cache the pages for its whole length; the others wait behind it.
bool Engine::would_admit() const {
  if (waiting_.empty() || static_cast<int64_t>(running_.size()) >= options_.max_batch) return false;
  const Sequence& s = sequences_[static_cast<std::size_t>(waiting_.front())];
  return PagedKVCache::pages_for(s.max_len) <= cache_->free_pages();
}

void Engine::admit() {
  while (would_admit()) {
    Sequence& s = sequences_[static_cast<std::size_t>(waiting_.front())];
    s.pages = cache_->allocate(PagedKVCache::pages_for(s.max_len));
    s.running = true;
    running_.push_back(waiting_.front());
    waiting_.pop_front();
  }
}

void Engine::run_step(std::span<const SequenceStep> steps, bool decode, bool argmax, bool chained) {
  model_.prepare_step(*workspace_, *cache_, steps);
  // Graphs on the CPU too (DeviceGraph then replays the callable): the same
  // keying and warm-up order runs in the CPU tests.
  const bool graphs = decode && options_.use_graphs;
  // (a one-sequence step switches to the per-kernel step once its context
  // outgrows the persistent one's whole-head attention: its own graph)
  const GraphKey key{static_cast<int64_t>(steps.size()), argmax, chained, model_.takes_persistent_step(*workspace_)};
  auto forward = [this, argmax, chained] { model_.forward_step(*workspace_, *cache_, argmax, chained); };
  if (!graphs || eager_only_.count(key)) return forward();
  auto found = graphs_.find(key);
  if (found == graphs_.end()) {
    if (!warmed_.count(key)) {  // first-use initialisation (GEMM plans, handles) happens outside capture
      forward();
      warmed_.insert(key);
      return;
    }
    DeviceGraph graph;
    try {
      graph.capture(model_.device(), forward);
    } catch (const Error&) {
      // A step that cannot be captured still runs, eagerly, from now on.
      eager_only_.insert(key);
      return forward();
    }
    found = graphs_.emplace(key, std::move(graph)).first;
  }
  // Developer tool (kernels/step_trace.h): one replay, the
  // HIPFORMERS_STEP_TRACE_AT-th (default 40), traced into the named file.
  static const char* trace_file = std::getenv("HIPFORMERS_STEP_TRACE_FILE");
  static int replays = 0;
  static const int trace_at = [] {
    const char* v = std::getenv("HIPFORMERS_STEP_TRACE_AT");
    return v && *v ? std::atoi(v) : 40;
  }();
  if (trace_file && *trace_file && ++replays == trace_at) {
    kernels::step_trace_arm(model_.device().index);
    found->second.replay();
    kernels::step_trace_write(model_.device().index, trace_file);
    return;
  }
  found->second.replay();
}

int Engine::fetch_ids(int64_t rows) {
  const int slot = ids_slot_;
  ids_slot_ = 1 - ids_slot_;
  HostStaging& staging = *ids_[static_cast<std::size_t>(slot)];
  staging.wait();  // its previous copy (two steps ago) was read already
  staging.download(workspace_->next.raw_data(), static_cast<std::size_t>(rows) * sizeof(int32_t));
  return slot;
}

// The queued step is the one the caller's appends asked for when every
// sequence of it still running got exactly the fed token (the argmax of the
// step before, still in result_slot_) and at least one still runs. Those
// that finished meanwhile (EOS, a stop string) just have no result: their
// rows were computed for nothing, but no step is lost. A sequence admitted
// meanwhile has its prefill next.
bool Engine::adopt_ahead(const Ahead& ahead, std::vector<StepResult>& results) {
  if (result_slot_ < 0) return false;
  HostStaging& fed_slot = *ids_[static_cast<std::size_t>(result_slot_)];
  fed_slot.wait();
  const auto* fed = static_cast<const int32_t*>(fed_slot.data());
  bool any = false;
  for (std::size_t i = 0; i < ahead.members.size(); ++i) {
    const Sequence& s = sequences_[static_cast<std::size_t>(ahead.members[i])];
    if (!s.running) continue;  // finished (ids are never reused)
    // No step ran for it since: the fed token sits at position s.cached.
    if (static_cast<int64_t>(s.tokens.size()) != s.cached + 1 || s.tokens[static_cast<std::size_t>(s.cached)] != fed[i])
      return false;
    any = true;
  }
  if (!any) return false;
  for (std::size_t i = 0; i < ahead.members.size(); ++i) {
    Sequence& s = sequences_[static_cast<std::size_t>(ahead.members[i])];
    if (!s.running) continue;
    s.cached += 1;
    results.push_back({ahead.members[i], static_cast<int64_t>(i)});
  }
  last_prefill_ = false;
  result_slot_ = ahead.slot;
  result_rows_ = static_cast<int64_t>(ahead.members.size());
  ++lookahead_adopted_;
  return true;
}

// After a decode step whose argmax rows are the sequences `members`, the
// next one, fed by those rows (so only while they are still the whole
// running batch, in order), if the next step(true) would run exactly that:
// nobody can join, and every sequence has room for the fed token and one more.
void Engine::queue_ahead(const std::vector<int64_t>& members) {
  if (!lookahead_enabled_ || members != running_ || would_admit()) return;
  static const int32_t kUnusedId = 0;  // the ids come from the device
  std::vector<SequenceStep> steps;
  Ahead ahead;
  for (int64_t id : members) {
    const Sequence& s = sequences_[static_cast<std::size_t>(id)];
    if (s.cached + 1 >= s.max_len || static_cast<int64_t>(s.tokens.size()) != s.cached) return;
    steps.push_back({std::span<const int32_t>(&kUnusedId, 1), s.cached, s.pages});
  }
  ahead.members = members;
  run_step(steps, true, true, true);
  ahead.slot = fetch_ids(static_cast<int64_t>(members.size()));
  ahead_ = std::move(ahead);
  ++lookahead_queued_;
}

// A lookahead that cannot be queued (a device error) must not lose the
// results of the step it follows: it is turned off and the error resurfaces
// with the next device work, if it was the device's.
void Engine::queue_ahead_or_stop(const std::vector<int64_t>& members) {
  try {
    queue_ahead(members);
  } catch (const Error&) {
    ahead_.reset();
    lookahead_enabled_ = false;
  }
}

std::vector<Engine::StepResult> Engine::step(bool argmax) {
  admit();
  if (ahead_) {
    // Adopted, or dropped: what it wrote is rewritten by the steps queued after it.
    const Ahead ahead = std::move(*ahead_);
    ahead_.reset();
    std::vector<StepResult> results;
    if (argmax && adopt_ahead(ahead, results)) {
      queue_ahead_or_stop(ahead.members);  // its argmax rows feed the next one
      return results;
    }
  }
  result_slot_ = -1;  // until this step's ids are queued
  if (running_.empty()) {
    if (!waiting_.empty()) throw_error(ErrorKind::kOutOfMemory, "the KV cache cannot hold the next sequence");
    return {};
  }
  // Prefill first: any running sequence with more than one pending token.
  std::vector<SequenceStep> steps;
  std::vector<int64_t> members;
  int64_t budget = options_.max_prefill_tokens;
  for (int64_t id : running_) {
    const Sequence& s = sequences_[static_cast<std::size_t>(id)];
    const int64_t pending = static_cast<int64_t>(s.tokens.size()) - s.cached;
    if (pending <= 1 || budget == 0) continue;
    const int64_t take = std::min(pending, budget);
    budget -= take;
    steps.push_back({std::span<const int32_t>(s.tokens).subspan(static_cast<std::size_t>(s.cached),
                                                                 static_cast<std::size_t>(take)),
                     s.cached, s.pages});
    members.push_back(id);
  }
  last_prefill_ = !steps.empty();
  if (steps.empty()) {
    for (int64_t id : running_) {
      const Sequence& s = sequences_[static_cast<std::size_t>(id)];
      if (static_cast<int64_t>(s.tokens.size()) - s.cached != 1) continue;  // awaiting its next token
      steps.push_back({std::span<const int32_t>(s.tokens).subspan(static_cast<std::size_t>(s.cached), 1), s.cached,
                       s.pages});
      members.push_back(id);
    }
  }
  if (steps.empty()) throw_invalid("Engine::step: every running sequence still awaits its next token");
  run_step(steps, !last_prefill_, argmax);
  if (argmax) {
    result_slot_ = fetch_ids(static_cast<int64_t>(steps.size()));
    result_rows_ = static_cast<int64_t>(steps.size());
  } else {
    result_slot_ = -1;
  }

  std::vector<StepResult> results;
  for (std::size_t i = 0; i < members.size(); ++i) {
    Sequence& s = sequences_[static_cast<std::size_t>(members[i])];
    s.cached += static_cast<int64_t>(steps[i].tokens.size());
    if (s.cached == static_cast<int64_t>(s.tokens.size()))
      results.push_back({members[i], static_cast<int64_t>(i)});
  }
  if (argmax && !last_prefill_) queue_ahead_or_stop(members);
  return results;
}

std::vector<int32_t> Engine::argmax_ids() const {
  if (result_slot_ < 0) throw_invalid("argmax_ids: the last step ran without argmax");
  const HostStaging& slot = *ids_[static_cast<std::size_t>(result_slot_)];
  slot.wait();
  const auto* p = static_cast<const int32_t*>(slot.data());
  return std::vector<int32_t>(p, p + result_rows_);
}

std::vector<float> Engine::logits_row(int64_t row) const {
  if (ahead_) throw_invalid("logits_row: a lookahead step was queued after step(true); its logits replaced these");
  return workspace_->logits_row_host(row);
}

void Engine::append(int64_t sequence, int32_t token) {
  if (sequence < 0 || sequence >= static_cast<int64_t>(sequences_.size()))
    throw_invalid("no sequence " + std::to_string(sequence));
  Sequence& s = sequences_[static_cast<std::size_t>(sequence)];
  if (!s.running || s.cached != static_cast<int64_t>(s.tokens.size()))
    throw_invalid("sequence " + std::to_string(sequence) + " is not awaiting a token");
  if (static_cast<int64_t>(s.tokens.size()) >= s.max_len)
    throw_invalid("sequence " + std::to_string(sequence) + " reached its length limit of " +
                  std::to_string(s.max_len));
  if (token < 0 || token >= model_.config().vocab_size) throw_invalid("token id " + std::to_string(token) + " out of range");
  s.tokens.push_back(token);
}

void Engine::finish(int64_t sequence) {
  if (sequence < 0 || sequence >= static_cast<int64_t>(sequences_.size()))
    throw_invalid("no sequence " + std::to_string(sequence));
  Sequence& s = sequences_[static_cast<std::size_t>(sequence)];
  if (s.done) return;
  s.done = true;
  std::vector<int32_t>().swap(s.tokens);  // a long-lived engine keeps no finished text
  if (s.running) {
    cache_->release(s.pages);
    s.pages.clear();
    s.running = false;
    running_.erase(std::find(running_.begin(), running_.end(), sequence));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), sequence));
  }
}

const std::vector<int32_t>& Engine::tokens(int64_t sequence) const {
  if (sequence < 0 || sequence >= static_cast<int64_t>(sequences_.size()))
    throw_invalid("no sequence " + std::to_string(sequence));
  return sequences_[static_cast<std::size_t>(sequence)].tokens;
}

}  // namespace hipformers
