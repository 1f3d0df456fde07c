// Continuous batching (engine.h) on the CPU: every sequence gets exactly what
// it gets alone, whatever the batch size, the prefill chunking or the KV
// budget (which makes sequences wait for pages); pages go back to the pool.
#include <gtest/gtest.h>

#include "hipformers/core/error.h"
#include "hipformers/generation/engine.h"
#include "hipformers/generation/generate.h"
#include "test_util.h"
#include "tiny_model.h"

namespace hipformers {
namespace {

// A caller that does not take the greedy token once: after `at` generated
// tokens, `sequence` appends argmax + 1 instead; or, with `stop`, it ends
// the sequence once it has `at` tokens (as an EOS would).
struct Choice {
  int64_t sequence, at;
  bool stop = false;
};

// Drives `engine` (prompts already added) greedily until every sequence has
// its `lengths` tokens, as generate() does; returns each one's tokens.
std::vector<std::vector<int32_t>> drive(Engine& engine, std::size_t sequences, const std::vector<int64_t>& lengths,
                                        const std::vector<Choice>& overrides = {}, int64_t* most_running = nullptr) {
  std::vector<std::vector<int32_t>> out(sequences);
  while (engine.has_work()) {
    const auto ready = engine.step(true);
    if (most_running) *most_running = std::max(*most_running, engine.running());
    const auto ids = engine.argmax_ids();
    for (const auto& r : ready) {
      auto& o = out[static_cast<std::size_t>(r.sequence)];
      int32_t next = ids[static_cast<std::size_t>(r.row)];
      bool stop = false;
      for (const Choice& c : overrides) {
        if (c.sequence != r.sequence) continue;
        if (!c.stop && c.at == static_cast<int64_t>(o.size())) next = (next + 1) % 64;
        if (c.stop && c.at == static_cast<int64_t>(o.size()) + 1) stop = true;
      }
      o.push_back(next);
      if (stop || static_cast<int64_t>(o.size()) == lengths[static_cast<std::size_t>(r.sequence)])
        engine.finish(r.sequence);
      else
        engine.append(r.sequence, next);
    }
  }
  EXPECT_EQ(engine.cache().free_pages(), engine.cache().num_pages());
  return out;
}

struct EngineTest : ::testing::Test {
  void SetUp() override {
    testing::TinySpec s;
    s.max_positions = 256;
    dir = testing::write_tiny_model("engine", s, testing::tiny_weights(s, 5));
    model = std::make_unique<CausalLM>(CausalLM::from_pretrained(dir));
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  // Greedy continuation of `prompt` by the reference forward().
  std::vector<int32_t> alone(const std::vector<int32_t>& prompt, int64_t n) const {
    KVCache cache = model->new_cache(static_cast<int64_t>(prompt.size()) + n);
    std::vector<int32_t> out;
    Tensor logits = model->forward(prompt, cache, false);
    for (int64_t i = 0; i < n; ++i) {
      const float* row = logits.data<float>();
      const auto next = static_cast<int32_t>(std::max_element(row, row + 64) - row);
      out.push_back(next);
      const int32_t feed[1] = {next};
      if (i + 1 < n) logits = model->forward(feed, cache, false);
    }
    return out;
  }

  // Runs every prompt through one engine, greedy on the device path.
  std::vector<std::vector<int32_t>> run(const EngineOptions& options, const std::vector<std::vector<int32_t>>& prompts,
                                        const std::vector<int64_t>& lengths, int64_t* most_running = nullptr) {
    Engine engine(*model, options);
    for (std::size_t i = 0; i < prompts.size(); ++i) engine.add(prompts[i], lengths[i]);
    return drive(engine, prompts.size(), lengths, {}, most_running);
  }

  std::filesystem::path dir;
  std::unique_ptr<CausalLM> model;
};

std::vector<std::vector<int32_t>> prompts_of(std::initializer_list<int> lengths) {
  std::vector<std::vector<int32_t>> p;
  int seed = 1;
  for (int n : lengths) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back((i * 11 + seed * 7) % 64);
    p.push_back(t);
    ++seed;
  }
  return p;
}

TEST_F(EngineTest, EverySequenceMatchesRunningAlone) {
  const auto prompts = prompts_of({1, 9, 70, 3, 130, 12});
  const std::vector<int64_t> lengths = {5, 12, 3, 20, 7, 1};
  std::vector<std::vector<int32_t>> want;
  for (std::size_t i = 0; i < prompts.size(); ++i) want.push_back(alone(prompts[i], lengths[i]));

  EngineOptions all;  // everything at once
  all.max_seq_len = 160;
  EXPECT_EQ(run(all, prompts, lengths), want);

  EngineOptions narrow;  // two at a time, prefill in chunks of 16 tokens
  narrow.max_batch = 2;
  narrow.max_prefill_tokens = 16;
  narrow.max_seq_len = 160;
  int64_t most = 0;
  EXPECT_EQ(run(narrow, prompts, lengths, &most), want);
  EXPECT_EQ(most, 2);

  EngineOptions scarce;  // pages for about one long sequence: the others wait for them
  scarce.max_seq_len = 160;
  scarce.kv_pages = 3;
  EXPECT_EQ(run(scarce, prompts, lengths), want);
}

// Decode steps are recorded once per batch size (after one eager run) and
// replayed; on the CPU the replay runs the same callable, so the keying and
// warm-up order are exercised here and must not change any token.
TEST_F(EngineTest, ReplayedDecodeStepsMatchEagerOnes) {
  const auto prompts = prompts_of({5, 9, 2});
  const std::vector<int64_t> lengths = {9, 4, 12};  // the batch shrinks 3 -> 2 -> 1
  EngineOptions eager;
  eager.max_seq_len = 64;
  eager.use_graphs = false;
  EngineOptions replayed = eager;
  replayed.use_graphs = true;
  const auto want = run(eager, prompts, lengths);
  Engine engine(*model, replayed);
  for (std::size_t i = 0; i < prompts.size(); ++i) engine.add(prompts[i], lengths[i]);
  EXPECT_EQ(drive(engine, prompts.size(), lengths), want);
  EXPECT_EQ(engine.graphs_captured(), 3);  // batch sizes 3, 2 and 1
}

TEST_F(EngineTest, GenerateUsesTheEngineAndKeepsPerSequenceOrder) {
  const auto prompts = prompts_of({4, 1, 11});
  GenerationOptions o;
  o.max_new_tokens = 6;
  std::vector<std::vector<int32_t>> streamed(3);
  o.on_token = [&](std::size_t s, int32_t t) {
    streamed[s].push_back(t);
    return true;
  };
  const auto out = generate(*model, GenerationConfig{}, prompts, o);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].generated, alone(prompts[i], 6));
    EXPECT_EQ(streamed[i], out[i].generated);
  }
}

// Greedy lookahead (engine.h): the next decode step is queued before the
// host has the ids. On the CPU (kOn) it runs the same adopt/drop logic as on
// a GPU; every token must be what the step-by-step engine gives, whether the
// queued step is adopted (the caller appends the argmax), dropped because
// the caller chose another token, or dropped because the batch changed.
// The same engine options with the lookahead off and on (on the CPU too).
std::pair<EngineOptions, EngineOptions> lookahead_off_on(int64_t max_seq_len, int64_t max_batch = 64,
                                                         bool graphs = true) {
  EngineOptions off;
  off.max_seq_len = max_seq_len;
  off.max_batch = max_batch;
  off.use_graphs = graphs;
  off.lookahead = EngineOptions::Lookahead::kOff;
  EngineOptions on = off;
  on.lookahead = EngineOptions::Lookahead::kOn;
  return {off, on};
}

std::vector<std::vector<int32_t>> run_choosing(const CausalLM& model, const EngineOptions& options,
                                               const std::vector<std::vector<int32_t>>& prompts,
                                               const std::vector<int64_t>& lengths, const std::vector<Choice>& overrides,
                                               int64_t* adopted = nullptr, int64_t* queued = nullptr) {
  Engine engine(model, options);
  for (std::size_t i = 0; i < prompts.size(); ++i) engine.add(prompts[i], lengths[i]);
  auto out = drive(engine, prompts.size(), lengths, overrides);
  if (adopted) *adopted = engine.lookahead_adopted();
  if (queued) *queued = engine.lookahead_queued();
  return out;
}

TEST_F(EngineTest, LookaheadStepsGiveTheSameTokens) {
  const auto prompts = prompts_of({5, 9, 2, 40});
  const std::vector<int64_t> lengths = {9, 30, 12, 70};  // the batch shrinks 4 -> 3 -> 2 -> 1; 40 + 70 crosses pages
  for (bool graphs : {false, true}) {
    const auto [off, on] = lookahead_off_on(128, 64, graphs);
    for (const std::vector<Choice>& overrides :
         {std::vector<Choice>{}, std::vector<Choice>{{1, 3}, {3, 3}, {3, 50}}, std::vector<Choice>{{0, 1}}}) {
      const auto want = run_choosing(*model, off, prompts, lengths, overrides);
      int64_t adopted = 0, queued = 0;
      const auto got = run_choosing(*model, on, prompts, lengths, overrides, &adopted, &queued);
      EXPECT_EQ(got, want) << "graphs " << graphs << ", " << overrides.size() << " overrides";
      // Most decode steps come from the lookahead; none is queued past a
      // sequence's last token, so only a changed token drops one.
      EXPECT_GT(adopted, 50) << overrides.size();
      EXPECT_EQ(queued > adopted, !overrides.empty()) << queued << " queued, " << adopted << " adopted";
    }
  }
}

TEST_F(EngineTest, LookaheadWaitsWhileASequenceCanJoin) {
  // Two at a time: while a third waits for a slot the lookahead is still
  // queued (nobody can join); once one finishes, the newcomer's prefill
  // runs first and no queued step is adopted across it.
  const auto prompts = prompts_of({3, 8, 5});
  const std::vector<int64_t> lengths = {4, 10, 6};
  const auto [off, on] = lookahead_off_on(64, 2);
  EXPECT_EQ(run_choosing(*model, on, prompts, lengths, {}), run_choosing(*model, off, prompts, lengths, {}));
}

TEST_F(EngineTest, LookaheadSurvivesEarlyFinishesAndNewcomers) {
  // Two at a time, four sequences, three of them ending early (as on EOS)
  // while a step is queued for them: the others keep the queued step's
  // results, the pages of the finished one go to a waiting sequence, whose
  // prefill runs next.
  const auto prompts = prompts_of({5, 9, 2, 7});
  const std::vector<int64_t> lengths = {20, 30, 25, 10};
  const std::vector<Choice> stops = {{0, 4, true}, {2, 3, true}, {1, 12, true}};
  const auto [off, on] = lookahead_off_on(64, 2);
  const auto want = run_choosing(*model, off, prompts, lengths, stops);
  EXPECT_EQ(want[0].size(), 4u);
  EXPECT_EQ(want[3].size(), 10u);
  int64_t adopted = 0, queued = 0;
  EXPECT_EQ(run_choosing(*model, on, prompts, lengths, stops, &adopted, &queued), want);
  EXPECT_GE(adopted, 10);
  EXPECT_EQ(queued, adopted);  // here no queued step is lost: no two sequences end at once
}

TEST_F(EngineTest, LogitsAfterALookaheadAreAnError) {
  EngineOptions on;
  on.max_seq_len = 64;
  on.lookahead = EngineOptions::Lookahead::kOn;
  Engine engine(*model, on);
  engine.add(prompts_of({4})[0], 8);
  (void)engine.step(true);  // prefill
  engine.append(0, engine.argmax_ids()[0]);
  (void)engine.step(true);  // decode, and the next one queued
  EXPECT_EQ(engine.lookahead_queued(), 1);
  EXPECT_EQ(testing::error_of([&] { (void)engine.logits_row(0); }).first, ErrorKind::kInvalidInput);
  // A step without argmax drops the queued one and has its own logits.
  engine.append(0, engine.argmax_ids()[0]);
  const auto ready = engine.step(false);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(engine.logits_row(0).size(), 64u);
  EXPECT_EQ(testing::error_of([&] { (void)engine.argmax_ids(); }).first, ErrorKind::kInvalidInput);
}

TEST_F(EngineTest, BadRequestsAreClearErrors) {
  EngineOptions o;
  o.max_seq_len = 100;
  o.kv_pages = 1;
  Engine engine(*model, o);
  EXPECT_NE(testing::error_of([&] { engine.add(std::vector<int32_t>{}, 3); }).second.find("is empty"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { engine.add(std::vector<int32_t>{1, 64}, 3); }).second.find("out of range"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { engine.add(std::vector<int32_t>(90, 1), 20); }).second.find("max_seq_len"),
            std::string::npos);
  const auto oom = testing::error_of([&] { engine.add(std::vector<int32_t>(60, 1), 20); });
  EXPECT_EQ(oom.first, ErrorKind::kOutOfMemory);
  EXPECT_NE(oom.second.find("KV cache pages"), std::string::npos);
  const int64_t id = engine.add(std::vector<int32_t>{1, 2}, 2);
  EXPECT_NE(testing::error_of([&] { engine.append(id, 3); }).second.find("not awaiting"), std::string::npos);
  engine.finish(id);
  EXPECT_FALSE(engine.has_work());
}

}  // namespace
}  // namespace hipformers
