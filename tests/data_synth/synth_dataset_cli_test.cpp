// What `kforge synth` adds to a set for a lab, through the real binary and the
// real CPU judge: template solutions judged and shipped only when verified,
// the split and reach estimate on the card, and the shortcut audit sharded
// over processes giving the same counts as one process.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "kforge/core/document.h"
#include "kforge/core/jsonl.h"
#include "kforge/core/process.h"
#include "kforge/core/remove_tree.h"
#include "kforge/core/task_spec.h"

namespace kforge::synth {
namespace {
namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("kforge_synth_dataset_" + std::to_string(::getpid()) + "_" + name);
  kforge::remove_tree(p);
  fs::create_directories(p);
  return p;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The command lines are written as a shell reads them (option strings), so
// /bin/sh runs them, named as the program.
int run(const std::string& cmd, std::string* output = nullptr) {
  ProcessOptions options;
  options.timeout_s = std::numeric_limits<double>::infinity();  // ctest bounds it
  options.max_output_bytes = size_t{256} << 20;
  const ProcessResult r = run_process({"/bin/sh", "-c", cmd}, options);
  if (output) *output = r.output;
  return r.exit_code;
}

std::string synth(const fs::path& out, int n, const std::string& extra) {
  return std::string(KFORGE_BIN) + " synth --n " + std::to_string(n) + " --backend cpu --seed 11 --workers 2 --out " +
         out.string() + " --baselines none --compile-baselines off --quiet " + extra;
}

// A task the template generator covers (gelu, then a softmax over rows),
// appended to a synthesized set as if a slot had committed it.
json covered_task() {
  return {{"id", "synth/handmade0000000"},
          {"source", "synth"},
          {"inputs", {{{"name", "x"}, {"shape", {64, 256}}, {"dtype", "float32"}}}},
          {"nodes",
           {{{"op", "gelu"}, {"in", {"x"}}, {"out", "t0"}},
            {{"op", "softmax"}, {"in", {"t0"}}, {"out", "y"}, {"attrs", {{"dim", -1}}}}}},
          {"outputs", {"y"}},
          {"shape_variants", {{{"x", {32, 256}}}, {{"x", {47, 256}}}}},
          {"tolerance", {{"rtol", 1e-2}, {"atol", 1e-2}}},
          {"meta", {{"synth", {{"graph_hash", "handmade"}}}, {"family", "softmax"}}}};
}

// A solutions stage out of time starts no more solutions, yet writes the
// index: covered tasks not judged say so, and a rerun judges them.
TEST(SynthDatasetCliTest, SolutionsOutOfTimeAreIndexedAsNotJudgedAndARerunJudgesThem) {
  const fs::path dir = scratch("solutions-time");
  std::string out;
  ASSERT_EQ(run(synth(dir, 2, ""), &out), 0) << out;
  std::ofstream(dir / "tasks.jsonl", std::ios::app) << covered_task().dump() << "\n";
  auto handmade_verdict = [&] {
    const json index = Document::from_file(dir / "solutions" / "index.json").root;
    for (const auto& t : index["per_task"]) {
      if (t["task_id"] == "synth/handmade0000000") return t["verdict"].get<std::string>();
    }
    return std::string("absent");
  };
  ASSERT_EQ(run(synth(dir, 3, "--solutions on --solutions-time-s 0.000001"), &out), 0) << out;
  const json index = Document::from_file(dir / "solutions" / "index.json").root;
  EXPECT_GE(index["covered"].get<int>(), 1) << index.dump();
  EXPECT_EQ(index["judged"], 0) << index.dump();
  EXPECT_EQ(index["verified"], 0) << index.dump();
  EXPECT_EQ(handmade_verdict(), "not judged");

  ASSERT_EQ(run(synth(dir, 3, "--solutions on"), &out), 0) << out;
  EXPECT_EQ(handmade_verdict(), "correct");
}

TEST(SynthDatasetCliTest, SolutionsSplitAndReachReachTheCard) {
  const fs::path dir = scratch("extras");
  std::string out;
  ASSERT_EQ(run(synth(dir, 2, ""), &out), 0) << out;
  std::ofstream(dir / "tasks.jsonl", std::ios::app) << covered_task().dump() << "\n";
  ASSERT_EQ(run(synth(dir, 3, "--solutions on --split 0.5,0.25,0.25 --reach-sample 200"), &out), 0) << out;

  const json index = Document::from_file(dir / "solutions" / "index.json").root;
  EXPECT_EQ(index["tasks"], 3);
  EXPECT_EQ(index["mode"], "cpp");
  EXPECT_GE(index["verified"].get<int>(), 1) << index.dump();
  bool handmade = false;
  std::set<std::string> shipped;
  for (const auto& e : fs::directory_iterator(dir / "solutions")) {
    if (e.path().extension() == ".cpp") shipped.insert(e.path().filename().string());
  }
  for (const auto& t : index["per_task"]) {
    if (!t["covered"].get<bool>()) {
      EXPECT_FALSE(t.value("blocked_by", std::string()).empty()) << t.dump();
      continue;
    }
    const bool correct = t["verdict"] == "correct";
    const std::string file = t.value("file", std::string());
    // Only what the judge verified ships.
    EXPECT_EQ(correct, !file.empty() && shipped.count(file) > 0) << t.dump();
    if (t["task_id"] == "synth/handmade0000000") {
      handmade = true;
      EXPECT_TRUE(correct) << t.dump();
      EXPECT_GT(t["speedup"].get<double>(), 0.0) << t.dump();
    }
  }
  EXPECT_TRUE(handmade) << index.dump();
  // A shipped speedup is a label: timed to target_rse, never stopped once a
  // reward was decided (eval.stop_when_decided, on for environment steps).
  int timed = 0;
  std::ifstream results(dir / "solutions" / "results.jsonl");
  for (std::string line; std::getline(results, line);) {
    const json row = json::parse(line);
    if (!row.contains("stop_reason")) continue;
    ++timed;
    EXPECT_NE(row["stop_reason"], "decided") << row.dump();
  }
  EXPECT_GE(timed, 1);
  EXPECT_GE(index["by_op"]["gelu"]["verified"].get<int>(), 1) << index["by_op"].dump();
  EXPECT_EQ(shipped.size(), static_cast<size_t>(index["verified"].get<int>()));

  const json split = Document::from_file(dir / "split" / "split.json").root;
  int64_t in_splits = 0;
  for (const char* s : {"train", "validation", "test"}) {
    in_splits += split["tasks"][s].get<int64_t>();
    EXPECT_TRUE(fs::exists(dir / "split" / (std::string(s) + ".jsonl"))) << s;
  }
  EXPECT_EQ(in_splits, 3);
  EXPECT_EQ(split["test_cores_in_train"], 0);

  const json reach = Document::from_file(dir / "reach.json").root;
  EXPECT_EQ(reach["samples"], 200);
  EXPECT_GE(reach["distinct"].get<int>(), 1) << reach.dump();

  const std::string card = read(dir / "DATASET_CARD.md");
  for (const char* section : {"## Contamination by what the kernel must do", "## Difficulty", "## Split",
                              "## Proof of solvability", "## Reachable space", "## Shortcut audit"}) {
    EXPECT_NE(card.find(section), std::string::npos) << section;
  }
  EXPECT_NE(card.find("distinct valid tasks"), std::string::npos);
  EXPECT_NE(card.find("appears in a train task (as its family or inside it): 0"), std::string::npos);
  kforge::remove_tree(dir);
}

// --jobs 2 runs two shard processes and merges them: the same counts as one
// process over the whole set, every task audited, and the card shows them,
// with the contamination cross-check's line once it has run.
// One task is made too big to audit beside the other shard (an allocation no
// host grants, except in the audit's run of deferred tasks alone): it is
// audited alone, counted once, and the card says so.
TEST(SynthDatasetCliTest, TheShardedAuditEqualsTheWholeOne) {
  const fs::path dir = scratch("audit");
  std::string out;
  ASSERT_EQ(run(synth(dir, 4, ""), &out), 0) << out;
  const std::string audit =
      std::string(KFORGE_PYTHON) + " " + KFORGE_SOURCE_DIR + "/bench/synth/audit_shortcuts.py " + dir.string();
  ASSERT_EQ(run(audit, &out), 0) << out;
  const json whole = json::parse(out.substr(out.rfind("\n{") + 1));
  const json first = json::parse(read(dir / "tasks.jsonl").substr(0, read(dir / "tasks.jsonl").find('\n')));
  std::string module = first["id"].get<std::string>();
  std::replace(module.begin(), module.end(), '/', '_');
  std::ofstream(dir / "kernelbench" / (module + ".py"), std::ios::app)
      << "\nimport sys as _sys\n_drawn_inputs = get_inputs\n\n\ndef get_inputs():\n"
      << "    if '--only' not in _sys.argv:\n        torch.empty(2 ** 45)\n    return _drawn_inputs()\n";
  ASSERT_EQ(run(audit + " --jobs 2 --write", &out), 0) << out;
  EXPECT_NE(read(dir / "DATASET_CARD.md")
                .find("Cross-check (bench/synth/audit_contamination.py: an op table of its "
                      "own, no cost model): not run"),
            std::string::npos);
  const std::string cross_check = std::string(KFORGE_PYTHON) + " " + KFORGE_SOURCE_DIR +
                                  "/bench/synth/audit_contamination.py " + dir.string() + " --write";
  ASSERT_EQ(run(cross_check, &out), 0) << out;
  const json crossed = json::parse(out.substr(out.find('{')));
  const json sharded = Document::from_file(dir / "audit_shortcuts.json").root;
  EXPECT_EQ(sharded["shards"], 2);
  EXPECT_EQ(sharded["audited"], 4);
  EXPECT_EQ(sharded["tasks"], 4);
  for (const char* k : {"passable_by_constant", "mostly_constant", "ignores_activations", "ignores_an_input",
                        "rms_below_atol", "errors"}) {
    EXPECT_EQ(sharded[k], whole[k]) << k << ": " << sharded.dump() << " vs " << whole.dump();
  }
  EXPECT_TRUE(sharded["failed_shards"].empty()) << sharded.dump();
  EXPECT_EQ(sharded["deferred_alone"], 1) << sharded.dump();
  ASSERT_EQ(run(synth(dir, 4, ""), &out), 0) << out;
  const std::string card = read(dir / "DATASET_CARD.md");
  EXPECT_NE(card.find("2 shards): audited 4 of 4 tasks"), std::string::npos) << card;
  EXPECT_NE(card.find(std::to_string(crossed["flagged"].get<int>()) + " of 4 tasks are one level-1 problem plus "
                                                                      "pointwise work"),
            std::string::npos)
      << card;
  EXPECT_NE(card.find("1 of the tasks ran out of device memory beside the other shards and were audited again alone"),
            std::string::npos)
      << card;
  kforge::remove_tree(dir);
}

}  // namespace
}  // namespace kforge::synth
