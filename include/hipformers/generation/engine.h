// Continuous batching over the paged KV cache: sequences join and leave a
// running batch between steps. Each step is either
//   prefill: prompt tokens of admitted sequences, packed up to
//            max_prefill_tokens (long prompts go in chunks), or
//   decode:  the one pending token of every running sequence, batched; on a
//            GPU this step is captured once per batch size as a device graph
//            and replayed.
// A sequence is admitted (FIFO) when the batch has room and the KV cache has
// the pages for its whole length (prompt + max new tokens), reserved up
// front, so a running sequence never waits for memory; its pages return to
// the pool when it finishes, and the next waiting sequence takes them.
//
// Prefill has priority: while an admitted sequence still has prompt tokens,
// the running ones wait (a latency cost, not a correctness one).
// One engine per device at a time: the GPU path queues everything on the
// device's one stream, and a graph capture would take in kernels another
// thread queued there meanwhile.
//
// Lookahead (greedy decode): right after a decode step of the whole running
// batch, step(true) queues the next decode step of the same batch, fed on
// the device by this step's argmax, before it returns; the device computes
// it while the host reads the ids (argmax_ids()) and appends them. The next
// step(true) adopts it when the caller appended exactly those ids to every
// sequence of it that still runs (a sequence that finished meanwhile just
// has no result; one admitted meanwhile is prefilled next), and drops it otherwise
// (it wrote keys/values only at positions a real step rewrites before any
// read, or into pages no sequence holds any more). It needs no host round
// trip between steps, which is what a one-sequence decode step otherwise
// waits for (the id copy, the next step's index upload and graph launch).
//
// The engine runs the model; the caller chooses tokens (generate.cc):
//   engine.add(prompt, max_new) ...
//   while (engine.has_work()) {
//     for (const StepResult& r : engine.step(argmax))   // sequences with a new distribution
//       engine.append(r.sequence, choose(r)) or engine.finish(r.sequence);
//   }
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "hipformers/models/causal_lm.h"
#include "hipformers/runtime/graph.h"
#include "hipformers/runtime/staging.h"

namespace hipformers {

struct EngineOptions {
  int64_t max_batch = 64;             // sequences decoded together
  int64_t max_prefill_tokens = 4096;  // tokens per prefill step
  int64_t max_seq_len = 0;            // longest prompt + new tokens to expect; 0 = max_position_embeddings
  int64_t kv_pages = 0;               // pages in the KV cache; 0 = enough for max_batch sequences of max_seq_len
  bool use_graphs = true;             // capture decode steps as device graphs (GPU)
  // Queue the next greedy decode step before the host has the ids (above):
  // kAuto does on GPUs (HIPFORMERS_DISABLE_LOOKAHEAD=1 turns it off); on the
  // CPU it would only compute a step early, so kAuto does not (kOn does:
  // the tests run the logic there).
  enum class Lookahead { kAuto, kOn, kOff };
  Lookahead lookahead = Lookahead::kAuto;
};

class Engine {
 public:
  Engine(const CausalLM& model, const EngineOptions& options);

  // Queues a sequence; returns its id (0, 1, ... in the order added). Error
  // for an empty prompt, an id out of the vocabulary, or a length
  // (prompt + max_new_tokens) beyond max_seq_len or the whole KV cache.
  int64_t add(std::span<const int32_t> prompt, int64_t max_new_tokens);
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }

  struct StepResult {
    int64_t sequence = 0;
    int64_t row = 0;  // its row of this step's logits
  };
  // Runs one step and returns the sequences whose pending tokens are all in
  // the cache now, i.e. that await their next token. With `argmax`, the
  // greedy choices are computed on the device (argmax_ids()).
  std::vector<StepResult> step(bool argmax);
  bool last_step_was_prefill() const { return last_prefill_; }
  // The greedy choices of the step step(true) last returned, one per row
  // (waits for their copy, not for a lookahead step queued after it).
  std::vector<int32_t> argmax_ids() const;
  // Row `row` of the last step's logits (waits). Error after step(true) when
  // a lookahead step was queued (the logits are then that step's).
  std::vector<float> logits_row(int64_t row) const;

  // The chosen next token of a sequence returned by step().
  void append(int64_t sequence, int32_t token);
  // Ends a sequence (returned by step(), or any running/waiting one), frees
  // its pages and forgets its tokens.
  void finish(int64_t sequence);

  const std::vector<int32_t>& tokens(int64_t sequence) const;
  const PagedKVCache& cache() const { return *cache_; }
  // The step buffers: after step(true) with a lookahead queued, they hold
  // (or will hold) that step's, not the returned one's.
  const StepWorkspace& workspace() const { return *workspace_; }
  int64_t running() const { return static_cast<int64_t>(running_.size()); }
  int64_t graphs_captured() const { return static_cast<int64_t>(graphs_.size()); }
  // Decode steps queued ahead (lookahead) and, of them, those adopted.
  int64_t lookahead_queued() const { return lookahead_queued_; }
  int64_t lookahead_adopted() const { return lookahead_adopted_; }

 private:
  struct Sequence {
    std::vector<int32_t> tokens;  // prompt + chosen tokens
    int64_t max_len = 0;
    int64_t cached = 0;           // tokens whose keys/values are in the cache
    std::vector<int32_t> pages;
    bool running = false, done = false;
  };
  // A decode step queued ahead: its sequences in row order and the ids
  // slot its argmax goes to.
  struct Ahead {
    std::vector<int64_t> members;
    int slot = 0;
  };
  void admit();
  bool would_admit() const;
  void run_step(std::span<const SequenceStep> steps, bool decode, bool argmax, bool chained = false);
  // Queues the copy of this step's argmax into the next ids slot; returns it.
  int fetch_ids(int64_t rows);
  bool adopt_ahead(const Ahead& ahead, std::vector<StepResult>& results);
  void queue_ahead(const std::vector<int64_t>& members);
  void queue_ahead_or_stop(const std::vector<int64_t>& members);

  const CausalLM& model_;
  EngineOptions options_;
  std::unique_ptr<PagedKVCache> cache_;
  std::unique_ptr<StepWorkspace> workspace_;
  std::vector<Sequence> sequences_;
  std::deque<int64_t> waiting_;
  std::vector<int64_t> running_;  // in admission order
  // Decode graphs by (batch size, argmax, ids from the previous argmax); a
  // shape runs once eagerly first (first-use initialisation, e.g. GEMM
  // plans) before it is captured.
  using GraphKey = std::tuple<int64_t, bool, bool, bool>;  // sequences, argmax, chained, persistent step
  std::map<GraphKey, DeviceGraph> graphs_;
  std::set<GraphKey> warmed_, eager_only_;  // ran once eagerly / could not be captured
  bool last_prefill_ = false;
  bool lookahead_enabled_ = false;
  // Greedy ids come back through two page-locked slots in turn: a step's
  // and the lookahead's queued after it.
  std::array<std::unique_ptr<HostStaging>, 2> ids_;
  int ids_slot_ = 0;        // the slot the next copy goes to
  int result_slot_ = -1;    // the slot holding the ids of the step last returned
  int64_t result_rows_ = 0;
  std::optional<Ahead> ahead_;
  int64_t lookahead_queued_ = 0, lookahead_adopted_ = 0;
};

}  // namespace hipformers
