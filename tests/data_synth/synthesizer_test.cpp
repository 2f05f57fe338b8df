// The synthesis run in-process: determinism across thread counts, baselines
// from the callback, resumption, and the exported dataset.
#include "kforge/data_synth/synthesizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "kforge/core/jsonl.h"
#include "kforge/core/remove_tree.h"
#include "kforge/core/task_set.h"
#include "kforge/data_synth/exporters.h"

namespace kforge::synth {
namespace {
namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("kforge_synth_run_" + std::to_string(::getpid()) + "_" + name);
  kforge::remove_tree(p);
  return p;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

SynthConfig config(int workers) {
  SynthConfig c;
  c.n = 5;
  c.seed = 21;
  c.workers = workers;
  c.shapes.window = default_window("cpu");
  // Aim at [0.2, 2] ms, a decade inside each edge of the window: small tasks
  // keep these tests quick. The window is the cost model's verdict, so the
  // sets compared across thread counts do not depend on the machine's load.
  c.shapes.margin = 10.0;
  return c;
}

// The graph hash of the task slot 0 takes when every task passes: the tests
// below make their judge fail it, so that a failure is certain whatever the
// seed. (at() throws, failing the test, when no task was written.)
std::string first_task_hash(const std::string& name) {
  const fs::path dir = scratch(name);
  SynthConfig one = config(1);
  one.n = 1;
  EXPECT_EQ(synthesize(one, dir, {}, {}).accepted, 1);
  std::string hash = load_task_set(dir / "tasks.jsonl").at(0).meta["synth"]["graph_hash"].get<std::string>();
  kforge::remove_tree(dir);
  return hash;
}

TEST(SynthesizerTest, SameFileForOneAndThreeWorkersWithCallbackBaselines) {
  const fs::path a = scratch("a"), b = scratch("b");
  int calls = 0;
  std::mutex mu;
  BaselineFn baseline = [&](const TaskSpec& t) {
    std::lock_guard<std::mutex> lock(mu);
    ++calls;
    BaselineResult r;
    r.device = "test-judge";
    r.eager_ms = 0.5;  // a value the test can find in the output
    EXPECT_TRUE(t.meta.contains("synth"));
    return r;
  };
  const SynthProgress pa = synthesize(config(3), a, baseline, {});
  const SynthProgress pb = synthesize(config(1), b, baseline, {});
  EXPECT_EQ(pa.accepted, 5);
  EXPECT_EQ(pb.accepted, 5);
  EXPECT_EQ(read(a / "tasks.jsonl"), read(b / "tasks.jsonl"));
  EXPECT_GE(calls, 10);
  const std::vector<TaskSpec> tasks = load_task_set(a / "tasks.jsonl");
  for (const auto& t : tasks) {
    ASSERT_TRUE(t.baselines.has_value());
    EXPECT_EQ(*t.baselines->eager_ms, 0.5);
    EXPECT_EQ(t.baselines->device, "test-judge");
  }

  // Resume: cut the file back to two tasks plus a torn line; the rerun
  // restores exactly the same five.
  const std::string full = read(a / "tasks.jsonl");
  size_t cut = 0;
  for (int i = 0; i < 2; ++i) cut = full.find('\n', cut) + 1;
  std::ofstream(a / "tasks.jsonl", std::ios::trunc) << full.substr(0, cut) << "{\"id\": \"torn";
  const SynthProgress pc = synthesize(config(2), a, baseline, {});
  EXPECT_EQ(pc.resumed, 2);
  EXPECT_EQ(read(a / "tasks.jsonl"), full);

  ExportOptions eo;
  eo.python = KFORGE_PYTHON;
  eo.plot_script = fs::path(KFORGE_SOURCE_DIR) / "data_synth" / "python" / "dataset_card_plots.py";
  const ExportSummary s = export_dataset(a, eo);
  EXPECT_EQ(s.tasks, 5u);
  EXPECT_EQ(s.python_files, 5u);
  EXPECT_TRUE(fs::exists(a / "DATASET_CARD.md"));
  EXPECT_TRUE(fs::exists(a / "contamination_report.json"));
  const std::string card = read(a / "DATASET_CARD.md");
  EXPECT_NE(card.find("Rejections by reason"), std::string::npos);
  if (s.plots) {
    EXPECT_TRUE(fs::exists(a / "plots" / "op_histogram.png"));
  }
  kforge::remove_tree(a);
  kforge::remove_tree(b);
}

// The judge's reference check is the last word: a task it refuses is
// rejected as judge_check and the slot moves on to its next attempt; the
// verdict depends on the task only, so the set stays deterministic.
TEST(SynthesizerTest, TasksTheJudgeRefusesAreRejectedDeterministically) {
  const fs::path a = scratch("judge_a"), b = scratch("judge_b");
  // The judge below refuses slot 0's first task, so at least one refusal is
  // certain whatever the seed.
  const std::string slot0 = first_task_hash("judge_first");
  std::atomic<int> refused{0};
  BaselineFn judge = [&](const TaskSpec& t) {
    BaselineResult r;
    r.device = "test-judge";
    const std::string hash = t.meta["synth"]["graph_hash"].get<std::string>();
    if (hash == slot0 || hash[0] < '8') {
      ++refused;
      r.invalid = "node 0: the output is constant (test verdict on hash " + hash.substr(0, 8) + ")";
      return r;
    }
    r.eager_ms = 0.25;
    return r;
  };
  SynthConfig c = config(2);
  c.n = 3;
  const SynthProgress pa = synthesize(c, a, judge, {});
  c.workers = 1;
  const SynthProgress pb = synthesize(c, b, judge, {});
  EXPECT_EQ(read(a / "tasks.jsonl"), read(b / "tasks.jsonl"));
  EXPECT_GT(refused.load(), 0);
  EXPECT_GT(pa.rejections.count("judge_check") ? pa.rejections.at("judge_check") : 0, 0);
  EXPECT_GT(pb.rejections.count("judge_check") ? pb.rejections.at("judge_check") : 0, 0);
  for (const auto& t : load_task_set(a / "tasks.jsonl")) {
    const std::string hash = t.meta["synth"]["graph_hash"].get<std::string>();
    EXPECT_NE(hash, slot0) << t.id;
    EXPECT_GE(hash[0], '8') << t.id;
    EXPECT_EQ(*t.baselines->eager_ms, 0.25);
  }
  kforge::remove_tree(a);
  kforge::remove_tree(b);
}

// A judge system error (e.g. "CUDA out of memory" while this process held
// the GPU) is asked again, up to judge_retries times; a task whose judge
// never answers is rejected as judge_error, never committed without its
// check. Slot 0's first task always fails here, so a rejection is certain;
// every other task fails twice, then answers.
TEST(SynthesizerTest, AJudgeSystemErrorIsRetriedAndNeverCommitted) {
  const fs::path a = scratch("sys_a"), b = scratch("sys_b");
  const std::string slot0 = first_task_hash("sys_first");
  std::mutex mu;
  std::map<std::string, int> calls;
  BaselineFn judge = [&](const TaskSpec& t) {
    const std::string hash = t.meta["synth"]["graph_hash"].get<std::string>();
    int call = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      call = ++calls[hash];
    }
    BaselineResult r;
    r.device = "test-judge";
    if (hash == slot0 || call <= 2) {
      r.error = "system error: CUDA out of memory (test judge, call " + std::to_string(call) + ")";
      return r;
    }
    r.eager_ms = 0.5;
    return r;
  };
  SynthConfig c = config(2);
  c.n = 3;
  const SynthProgress pa = synthesize(c, a, judge, {});
  ASSERT_EQ(pa.accepted, 3);
  EXPECT_EQ(pa.rejections.count("judge_error") ? pa.rejections.at("judge_error") : 0, 1);
  EXPECT_EQ(calls[slot0], 1 + c.judge_retries) << "asked once and retried judge_retries times";
  EXPECT_EQ(pa.judge_retries, 3 + 2 * 3);  // slot 0's first task, then two per committed task
  for (const auto& t : load_task_set(a / "tasks.jsonl")) {
    EXPECT_NE(t.meta["synth"]["graph_hash"].get<std::string>(), slot0);
    ASSERT_TRUE(t.baselines.has_value()) << t.id;
    EXPECT_EQ(*t.baselines->eager_ms, 0.5) << t.id;
  }
  int slot_lines = 0;
  for_each_jsonl_line(a / "slots.jsonl", [&](const Document& d, size_t) {
    EXPECT_EQ(d.root["judge_retries"].get<int>(), d.root["slot"] == 0 ? 5 : 2) << d.root.dump();
    EXPECT_EQ(d.root["baseline_error"], "") << d.root.dump();
    ++slot_lines;
  });
  EXPECT_EQ(slot_lines, 3);
  // The same set with one worker (calls restart, so the same errors come).
  calls.clear();
  c.workers = 1;
  synthesize(c, b, judge, {});
  EXPECT_EQ(read(a / "tasks.jsonl"), read(b / "tasks.jsonl"));
  ExportOptions eo;
  const ExportSummary s = export_dataset(a, eo);
  EXPECT_EQ(s.tasks, 3u);
  EXPECT_NE(read(a / "DATASET_CARD.md")
                .find("Judge system errors asked again: 9; attempts rejected as judge_error "
                      "after their retries: 1"),
            std::string::npos)
      << read(a / "DATASET_CARD.md");
  kforge::remove_tree(a);
  kforge::remove_tree(b);
}

// SynthConfig::cancel (what SIGINT sets in `kforge synth`): the run stops
// with what it committed, nothing half-done, and a rerun completes the same
// set an uninterrupted run makes.
TEST(SynthesizerTest, CancelStopsCleanlyAndARerunCompletesTheSameSet) {
  const fs::path full = scratch("cancel_full"), part = scratch("cancel_part");
  SynthConfig c = config(2);
  c.n = 4;
  ASSERT_EQ(synthesize(c, full, {}, {}).accepted, 4);

  std::atomic<bool> cancel{false};
  std::atomic<int> seen{0};
  // The callback stands in for nothing: it only counts tasks reaching the
  // baseline stage and raises the flag at the second, as a signal would.
  BaselineFn count = [&](const TaskSpec&) {
    if (++seen >= 2) cancel = true;
    return BaselineResult{};
  };
  c.cancel = &cancel;
  const SynthProgress p = synthesize(c, part, count, {});
  EXPECT_TRUE(p.cancelled);
  EXPECT_FALSE(p.done);
  EXPECT_LT(p.accepted, 4);
  const std::string head = read(part / "tasks.jsonl");
  EXPECT_EQ(read(full / "tasks.jsonl").substr(0, head.size()), head) << "committed tasks are a prefix of the full set";

  c.cancel = nullptr;
  const SynthProgress q = synthesize(c, part, {}, {});
  EXPECT_TRUE(q.done);
  EXPECT_EQ(q.resumed, p.accepted);
  EXPECT_EQ(read(part / "tasks.jsonl"), read(full / "tasks.jsonl"));
  kforge::remove_tree(full);
  kforge::remove_tree(part);
}

// eq, ne and log are in the vocabulary and the composer reaches
// them in forms that pass every filter: eq/ne against the bound a relu or
// clamp clipped to (a mask true for the clipped share), log of a positive
// value (after softplus, sigmoid, softmax, relu + c; never after exp). A
// 1,000-task set had none of the three before. The run is seeded, so the
// counts are the same on every machine; the share of each is a few percent,
// so N = 120 holds several of each.
TEST(SynthesizerTest, ASeededRunReachesEqNeAndLog) {
  const fs::path dir = scratch("reach");
  SynthConfig c = config(2);
  c.n = 120;
  c.seed = 1;
  ASSERT_EQ(synthesize(c, dir, {}, {}).accepted, c.n);
  std::map<std::string, int> uses;
  for (const auto& t : load_task_set(dir / "tasks.jsonl")) {
    std::set<std::string> ops;
    for (const auto& n : t.nodes) ops.insert(n.op);
    for (const auto& op : ops) ++uses[op];
    // eq/ne compare with a value the input takes exactly (its clip bound),
    // and what they gate is a where: a mask, not a constant.
    for (const auto& n : t.nodes) {
      if (n.op == "eq" || n.op == "ne") {
        EXPECT_TRUE(n.attrs.contains("other")) << t.id;
      }
    }
  }
  std::printf("tasks using eq %d, ne %d, log %d, where %d, argmax %d, argmin %d of %lld\n", uses["eq"], uses["ne"],
              uses["log"], uses["where"], uses["argmax"], uses["argmin"], static_cast<long long>(c.n));
  for (const char* op : {"eq", "ne", "log", "argmax", "argmin"}) {
    EXPECT_GE(uses[op], 2) << op << " in " << c.n << " tasks";
  }
  EXPECT_GE(uses["where"], uses["eq"] + uses["ne"]);
  kforge::remove_tree(dir);
}

// A curriculum: only tasks whose predicted headroom is in the range are
// committed; the others are rejected as headroom_range before any filter.
TEST(SynthesizerTest, AHeadroomRangeKeepsOnlyThoseTasks) {
  const fs::path dir = scratch("headroom");
  SynthConfig c = config(2);
  c.n = 4;
  c.headroom_range = {2.0, 8.0};
  const SynthProgress p = synthesize(c, dir, {}, {});
  ASSERT_EQ(p.accepted, 4);
  EXPECT_GT(p.rejections.count("headroom_range") ? p.rejections.at("headroom_range") : 0, 0);
  for (const auto& t : load_task_set(dir / "tasks.jsonl")) {
    const double h = t.meta["difficulty"]["predicted_headroom"].get<double>();
    EXPECT_GE(h, 2.0) << t.id;
    EXPECT_LE(h, 8.0) << t.id;
    EXPECT_FALSE(t.meta["family"].get<std::string>().empty()) << t.id;
  }
  EXPECT_EQ(c.identity()["headroom_range"], json({2.0, 8.0}));
  kforge::remove_tree(dir);
}

// The card lists op counts in numeric order (a JSON object sorts its keys as
// strings, "10" before "2"), says how tolerances were scaled and states the
// level-3 policy as the owner's decision.
TEST(SynthesizerTest, TheCardOrdersCountsByNumberAndStatesTheOwnersDecision) {
  const fs::path dir = scratch("card");
  fs::create_directories(dir);
  auto chain = [](int nodes, double atol_scale) {
    TaskSpec t;
    t.id = "synth/chain" + std::to_string(nodes);
    t.source = "synth";
    TensorSpec x;
    x.name = "x";
    x.shape = {4, 8};
    x.init.kind = "normal";
    t.inputs = {x};
    std::string prev = "x";
    for (int i = 0; i < nodes; ++i) {
      const std::string out = "t" + std::to_string(i);
      t.nodes.push_back({i % 2 ? "tanh" : "sin", {prev}, out, json::object()});
      prev = out;
    }
    t.outputs = {prev};
    t.tolerance = Tolerance{1e-2 * atol_scale, 1e-2};
    t.meta = {{"synth", {{"atol_scale", atol_scale}}}};
    return t;
  };
  {
    std::ofstream f(dir / "tasks.jsonl");
    for (const auto& t : {chain(2, 1), chain(10, 16), chain(3, 2), chain(10, 1)}) f << to_json(t).dump() << "\n";
  }
  ExportOptions eo;
  eo.plot_script = dir / "no_plots.py";
  export_dataset(dir, eo);
  const std::string card = read(dir / "DATASET_CARD.md");
  const size_t two = card.find("| 2 | 1 |"), three = card.find("| 3 | 1 |"), ten = card.find("| 10 | 2 |");
  ASSERT_NE(two, std::string::npos) << card;
  ASSERT_NE(ten, std::string::npos) << card;
  EXPECT_LT(two, three) << card;
  EXPECT_LT(three, ten) << card;
  const size_t tolerances = card.find("## Tolerances");
  ASSERT_NE(tolerances, std::string::npos) << card;
  EXPECT_LT(card.find("| 2 | 1 |", tolerances), card.find("| 16 | 1 |", tolerances)) << card;
  EXPECT_NE(card.find("Decision for the owner: level-3-like blocks"), std::string::npos) << card;
  EXPECT_NE(card.find("rejected"), std::string::npos) << card;
  kforge::remove_tree(dir);
}

// Tasks of another output format come from other rules (kforge-synth/4:
// contamination by what the kernel must do, difficulty labels): a folder
// written by /2 is refused, naming both formats, rather than continued.
TEST(SynthesizerTest, AFolderOfAnotherFormatIsRefusedNamingIt) {
  const fs::path dir = scratch("format");
  fs::create_directories(dir);
  const SynthConfig c = config(1);
  json old = c.identity();
  EXPECT_EQ(old["format"], kSynthFormat);
  old["format"] = "kforge-synth/2";
  std::ofstream(dir / "run.json") << old.dump(2) << "\n";
  try {
    synthesize(c, dir, {}, {});
    FAIL() << "resumed a kforge-synth/2 folder";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("written by kforge-synth/2"), std::string::npos) << what;
    EXPECT_NE(what.find(std::string("writes ") + kSynthFormat), std::string::npos) << what;
    EXPECT_NE(what.find("refused, not resumed"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(dir / "tasks.jsonl"));
  kforge::remove_tree(dir);
}

}  // namespace
}  // namespace kforge::synth
