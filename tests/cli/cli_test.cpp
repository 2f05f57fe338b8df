// The `kforge` executable end to end: real processes, real files, exit codes.
// Hostile documents are in cli_hostile_files_test.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_test_support.h"
#include "kforge/core/remove_tree.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using kforge::testing::CmdResult;
using kforge::testing::config_arg;
using kforge::testing::has;
using kforge::testing::kData;
using kforge::testing::run_kforge;
using kforge::testing::solution_arg;
using kforge::testing::task_arg;
using kforge::testing::timed_task_arg;

TEST(CliTest, EvalPrintsAReadableReport) {
  const CmdResult r = run_kforge("eval " + timed_task_arg() + " " + solution_arg("correct") + " " + config_arg());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "kforge eval: test/scale_bias_relu_timed")) << r.output;
  EXPECT_TRUE(has(r.output, "verdict    correct")) << r.output;
  EXPECT_TRUE(has(r.output, "checks passed")) << r.output;
  EXPECT_TRUE(has(r.output, "candidate")) << r.output;
  EXPECT_TRUE(has(r.output, "p25")) << r.output;
  EXPECT_TRUE(has(r.output, "x vs eager")) << r.output;
  EXPECT_TRUE(has(r.output, "reward")) << r.output;
}

TEST(CliTest, EvalJsonIsMachineReadable) {
  const CmdResult r = run_kforge("eval --json " + timed_task_arg() + " " + solution_arg("correct") + " " + config_arg(),
                                 /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.output;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["verdict"], "correct");
  EXPECT_GT(j["reward"].get<double>(), 0.0);
  EXPECT_EQ(j["reward_components"]["total"], j["reward"]);
  EXPECT_TRUE(j["result"]["terminated"].get<bool>());
  EXPECT_TRUE(j["measurement"]["speedup_eager"].is_number());
}

TEST(CliTest, EvalOfAWrongSolutionStillSucceeds) {
  const CmdResult r = run_kforge(
      "eval --json " + task_arg() + " " + solution_arg("wrong") + " " + config_arg() + " --reward tiered --seeds 1",
      false);
  ASSERT_EQ(r.code, 0) << r.output;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["verdict"], "wrong");
  EXPECT_DOUBLE_EQ(j["reward"].get<double>(), -1.0) << "tiered: -1 for a wrong answer";
  EXPECT_TRUE(j["reward_components"].contains("tiered"));
}

// A hostile-input probe (docs/threat-model.md#who-is-to-blame), through the command: a CPU candidate that writes
// {"type": 7} to the runner's control socket used to end as "system error"
// with exit 3 (reward 0, turn not counted). It is the candidate's doing: the
// violation harness_tamper, a negative reward, exit 0.
TEST(CliTest, EvalOfAForgedControlFrameIsTheCandidatesViolation) {
  const fs::path source = fs::path(KFORGE_BINARY_DIR) / "tests" / "cli" / "control_frame_type_7.cpp";
  fs::create_directories(source.parent_path());
  std::FILE* f = std::fopen(source.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(R"(#include <kforge/kernel_abi.h>
#include <stdio.h>
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  static const unsigned char frame[] = {7, 0, 0, 0, 0x81, 0xa4, 't', 'y', 'p', 'e', 0x07};
  fputc('\n', stdout); fflush(stdout);
  int saved = stdout->_fileno; stdout->_fileno = 3;
  fwrite(frame, 1, sizeof(frame), stdout); fflush(stdout);
  stdout->_fileno = saved;
  return 0;
}
)",
             f);
  std::fclose(f);
  const CmdResult r = run_kforge("eval --json " + task_arg() + " --solution '" + source.string() + "' " + config_arg(),
                                 /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.output;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["verdict"], "violation") << r.out;
  bool tamper = false;
  for (const auto& v : j["measurement"].value("violations", json::array()))
    tamper = tamper || v["check"] == "harness_tamper";
  EXPECT_TRUE(tamper) << j["measurement"].dump();
  EXPECT_LT(j["reward"].get<double>(), 0.0);
}

TEST(CliTest, TaskRenderPrintsKernelBenchPython) {
  const CmdResult r = run_kforge("task render '" + (kData / "scale_bias_relu.json").string() + "'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "class Model")) << r.output;
  EXPECT_TRUE(has(r.output, "def get_inputs")) << r.output;
  EXPECT_TRUE(has(r.output, "def get_init_inputs")) << r.output;
}

TEST(CliTest, TaskCheckPrintsInferredShapes) {
  const CmdResult r = run_kforge("task check '" + (kData / "scale_bias_relu.json").string() + "'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "ok: test/scale_bias_relu")) << r.output;
  EXPECT_TRUE(has(r.output, "| outputs[0] | y | output | [64, 32]")) << r.output;
  EXPECT_TRUE(has(r.output, "x [17, 32] -> y [17, 32]")) << r.output;
}

TEST(CliTest, TaskCheckRunsTheReferenceAndRefusesTasksNoSolutionCanPass) {
  const std::string nan_task = (kData / "nan_reference.json").string();
  CmdResult r = run_kforge("task check '" + nan_task + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "nan_reference.json: task 'test/nan_reference' cannot be judged: node 1 (log -> t1): "))
      << r.output;
  EXPECT_TRUE(has(r.output, "elements are NaN on the base shape (x: [64, 64])")) << r.output;

  r = run_kforge("task check '" + (kData / "constant_reference.json").string() + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "node 1 (sub -> t1): the output is constant")) << r.output;

  r = run_kforge("task check --json '" + nan_task + "'", /*merge_stderr=*/false);
  EXPECT_EQ(r.code, 2) << r.output;
  const json j = json::parse(r.out);
  EXPECT_FALSE(j["valid"].get<bool>());
  EXPECT_EQ(j["reference"]["status"], "invalid");
  EXPECT_GT(j["reference"]["nodes"][0]["nodes"][1]["nan"].get<int>(), 0) << j.dump();

  // Static checks only: the NaN is not found.
  r = run_kforge("task check --no-reference '" + nan_task + "'");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "reference not run")) << r.output;
}

// KernelBench level1/19_ReLU at its own size (two 6 GiB tensors): a verdict
// that names the need and the limit, exit 2, before anything is allocated;
// `kforge eval` on it too (it used to be "lost the judge ... SIGKILL").
TEST(CliTest, TaskCheckAndEvalRefuseATaskTooLargeForTheJudgeWithFigures) {
  const std::string task = (kData / "kernelbench_level1_19_relu_full_size.json").string();
  const std::string limits = "--config '" + (kData / "judge_limits.yaml").string() + "'";
  const std::string verdict =
      "task 'kernelbench/level1/19_ReLU' cannot be judged: the task is too large for a judge on the cpu backend: "
      "checking its reference needs about 24.0 GiB of memory (the base shape), and the judge may use 8.0 GiB "
      "(judge_memory_limit_bytes): shrink its shapes or check it with --backend cuda";
  CmdResult r = run_kforge("task check " + limits + " '" + task + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, verdict)) << r.output;
  r = run_kforge("eval " + limits + " --task '" + task + "' " + solution_arg("correct"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, verdict)) << r.output;
}

TEST(CliTest, BundledExamplesPassTheReferenceCheck) {
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(KFORGE_SOURCE_DIR) / "examples")) {
    const fs::path task = entry.path() / "task.json";
    if (!fs::exists(task)) continue;
    const CmdResult r = run_kforge("task check --backend cpu '" + task.string() + "'");
    EXPECT_EQ(r.code, 0) << task << ": " << r.output;
    EXPECT_TRUE(has(r.output, "reference checked on")) << r.output;
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

TEST(CliTest, TaskBaselineTimesTheReferenceAlone) {
  const std::string task = (kData / "scale_bias_relu_timed.json").string();
  CmdResult r = run_kforge("task baseline '" + task + "' " + config_arg());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "test/scale_bias_relu_timed: eager reference ")) << r.output;
  EXPECT_TRUE(has(r.output, "ms median")) << r.output;
  EXPECT_TRUE(has(r.output, "by cpu_time")) << r.output;

  r = run_kforge("task baseline --json '" + task + "' " + config_arg(), /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.output;
  const json j = json::parse(r.out);
  const json& t = j["reference"]["timing"];
  EXPECT_GT(t["median_ms"].get<double>(), 0.0) << t.dump();
  EXPECT_GE(t["samples"].get<int>(), 3) << "fast.yaml's min_samples";
  EXPECT_FALSE(t["stop_reason"].get<std::string>().empty());

  r = run_kforge("task baseline '" + (kData / "nan_reference.json").string() + "' " + config_arg());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "node 1 (log -> t1)")) << r.output;
}

// A results file with its lines parsed, by key (the last line of a key wins).
std::map<std::string, json> results_by_key(const fs::path& path, size_t* lines = nullptr) {
  std::map<std::string, json> rows;
  std::ifstream in(path);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++n;
    const json row = json::parse(line);
    rows[row["key"].get<std::string>()] = row;
  }
  if (lines) *lines = n;
  return rows;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(KFORGE_BINARY_DIR) / "tests" / "cli" / name;
  kforge::remove_tree(dir);
  fs::create_directories(dir);
  return dir;
}

// DIR/task.json beside DIR/*.cpp, and the results file in the same folder:
// neither is taken for a solution (the task used to be reported as a bad
// solution).
TEST(CliTest, EvalBatchSkipsTheTaskAndResultsFilesInTheSolutionsFolder) {
  const fs::path dir = fresh_dir("batch-folder-with-task");
  fs::create_directories(dir);
  fs::copy_file(kData / "scale_bias_relu.json", dir / "task.json", fs::copy_options::overwrite_existing);
  for (const char* name : {"correct.cpp", "wrong.cpp"}) {
    fs::copy_file(kData / name, dir / name, fs::copy_options::overwrite_existing);
  }
  const CmdResult r =
      run_kforge("eval --task '" + (dir / "task.json").string() + "' --solutions '" + dir.string() + "' --results '" +
                     (dir / "results.jsonl").string() + "' " + config_arg() + " --json",
                 /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.output;
  const json summary = json::parse(r.out);
  EXPECT_EQ(summary["evaluated_now"], 2) << summary.dump();
  EXPECT_EQ(summary["verdicts"]["correct"], 1) << summary.dump();
  EXPECT_EQ(summary["verdicts"]["wrong"], 1) << summary.dump();
  EXPECT_EQ(summary["verdicts"].size(), 2u) << "no bad-input row for task.json or results.jsonl: " << summary.dump();
}

TEST(CliTest, EvalBatchOverAFolderWritesResultsAndResumes) {
  const fs::path dir = fresh_dir("batch-folder");
  fs::create_directories(dir / "solutions");
  for (const char* name : {"correct.cpp", "wrong.cpp", "compile_error.cpp", "crash.cpp"}) {
    fs::copy_file(kData / name, dir / "solutions" / name, fs::copy_options::overwrite_existing);
  }
  const fs::path results = dir / "results.jsonl";
  const std::string common =
      " --solutions '" + (dir / "solutions").string() + "' --results '" + results.string() + "' " + config_arg();
  CmdResult r = run_kforge("eval " + task_arg() + common);
  // Every pair was evaluated (a crash and a compile error are verdicts).
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "[1/4]")) << "plain progress lines when stderr is not a terminal:\n" << r.output;
  EXPECT_TRUE(has(r.output, "[4/4]")) << r.output;
  EXPECT_TRUE(has(r.output, "verdict")) << r.output;
  EXPECT_TRUE(has(r.output, "4 evaluated now, 0 from earlier results")) << r.output;
  size_t lines = 0;
  std::map<std::string, json> rows = results_by_key(results, &lines);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(lines, 4u);
  std::map<std::string, std::string> verdicts;
  for (const auto& [key, row] : rows) {
    verdicts[fs::path(row["solution"].get<std::string>()).filename().string()] = row["verdict"].get<std::string>();
    EXPECT_TRUE(row["evaluated"].get<bool>()) << row.dump();
    EXPECT_EQ(row["task_id"], "test/scale_bias_relu");
  }
  EXPECT_EQ(verdicts["correct.cpp"], "correct");
  EXPECT_EQ(verdicts["wrong.cpp"], "wrong");
  EXPECT_EQ(verdicts["compile_error.cpp"], "compile_error");
  EXPECT_EQ(verdicts["crash.cpp"], "crash");

  // A rerun evaluates nothing again and reports the same table.
  r = run_kforge("eval " + task_arg() + common + " --json", /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.output;
  const json summary = json::parse(r.out);
  EXPECT_EQ(summary["evaluated_now"], 0);
  EXPECT_EQ(summary["from_earlier_results"], 4);
  EXPECT_EQ(summary["verdicts"]["correct"], 1);
  results_by_key(results, &lines);
  EXPECT_EQ(lines, 4u) << "a rerun must not append anything";

  // A run killed mid-line leaves a torn last line; a new solution and the
  // torn pair are evaluated, the rest skipped.
  {
    std::ofstream out(results, std::ios::app);
    out << R"({"key": "torn)";
  }
  fs::copy_file(kData / "correct.cpp", dir / "solutions" / "correct_again.cpp");
  std::ofstream(dir / "solutions" / "correct_again.cpp", std::ios::app) << "\n// another solution\n";
  r = run_kforge("eval " + task_arg() + common + " --json", /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(json::parse(r.out)["evaluated_now"], 1) << r.out;
  EXPECT_EQ(json::parse(r.out)["pairs"], 5) << r.out;
  // The torn line was cut off, not glued to the next row: the file reads
  // whole, one row per pair, and a third run has nothing left to do.
  rows = results_by_key(results, &lines);
  EXPECT_EQ(rows.size(), 5u);
  EXPECT_EQ(lines, 5u);
  r = run_kforge("eval " + task_arg() + common + " --json", /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(json::parse(r.out)["evaluated_now"], 0) << r.out;
  EXPECT_EQ(json::parse(r.out)["from_earlier_results"], 5) << r.out;
}

// --time-limit-s: past it no pair starts; those left have no row, the exit
// says the batch is incomplete, and a rerun without the limit evaluates them.
TEST(CliTest, EvalBatchPastItsTimeLimitStartsNothingMoreAndExitsIncomplete) {
  const fs::path dir = fresh_dir("batch-time-limit");
  fs::create_directories(dir / "solutions");
  for (const char* name : {"correct.cpp", "wrong.cpp"}) {
    fs::copy_file(kData / name, dir / "solutions" / name, fs::copy_options::overwrite_existing);
  }
  const fs::path results = dir / "results.jsonl";
  const std::string common =
      " --solutions '" + (dir / "solutions").string() + "' --results '" + results.string() + "' " + config_arg();
  CmdResult r = run_kforge("eval " + task_arg() + common + " --time-limit-s 0.000001");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "0 evaluated now, 0 from earlier results, 0 not evaluated, 2 not started")) << r.output;
  size_t lines = 0;
  EXPECT_TRUE(results_by_key(results, &lines).empty());
  EXPECT_EQ(lines, 0u);

  r = run_kforge("eval " + task_arg() + common + " --json", /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(json::parse(r.out)["evaluated_now"], 2) << r.out;
  EXPECT_EQ(json::parse(r.out)["not_started"], 0) << r.out;
}

TEST(CliTest, EvalBatchReadsListAndJsonlPairsAndReportsBadInput) {
  const fs::path dir = fresh_dir("batch-pairs");
  const std::string task = (kData / "scale_bias_relu.json").string();
  {
    std::ofstream list(dir / "pairs.txt");
    list << "# task solution\n\n"
         << task << " " << (kData / "correct.cpp").string() << "\n"
         << task << " " << (kData / "wrong.cpp").string() << "\n"
         << task << " " << (dir / "missing.cpp").string() << "\n";
  }
  CmdResult r = run_kforge("eval --solutions '" + (dir / "pairs.txt").string() + "' --results '" +
                           (dir / "list.jsonl").string() + "' " + config_arg());
  // The missing file is bad input: the rest is evaluated, the exit says not all was.
  EXPECT_EQ(r.code, 1) << r.output;
  std::map<std::string, json> rows = results_by_key(dir / "list.jsonl");
  ASSERT_EQ(rows.size(), 3u) << r.output;
  int bad = 0, correct = 0;
  for (const auto& [key, row] : rows) {
    if (row["verdict"] == "bad input") {
      ++bad;
      EXPECT_TRUE(has(row["error"].get<std::string>(), "missing.cpp")) << row.dump();
    }
    correct += row["verdict"] == "correct";
  }
  EXPECT_EQ(bad, 1);
  EXPECT_EQ(correct, 1);

  {
    std::ofstream jsonl(dir / "pairs.jsonl");
    jsonl << json({{"id", "by-path"}, {"task", task}, {"solution", (kData / "correct.cpp").string()}}).dump() << "\n";
    jsonl << json({{"id", "inline"},
                   {"task", task},
                   {"solution", {{"mode", "cpp"}, {"source", "#include <kforge/kernel_abi.h>\nint x;\n"}}}})
                 .dump()
          << "\n";
    jsonl << json({{"id", "typo"}, {"task", task}, {"solutoin", "x.cpp"}}).dump() << "\n";
  }
  r = run_kforge("eval --solutions '" + (dir / "pairs.jsonl").string() + "' --results '" +
                 (dir / "jsonl.jsonl").string() + "' " + config_arg());
  EXPECT_EQ(r.code, 1) << r.output;
  rows = results_by_key(dir / "jsonl.jsonl");
  ASSERT_EQ(rows.size(), 3u) << r.output;
  for (const auto& [key, row] : rows) {
    if (row["label"] == "by-path") {
      EXPECT_EQ(row["verdict"], "correct") << row.dump();
    }
    if (row["label"] == "inline") {
      EXPECT_EQ(row["verdict"], "rejected") << row.dump();  // no kf_forward
    }
    if (row["label"] == "typo") {
      EXPECT_EQ(row["verdict"], "bad input");
      EXPECT_TRUE(has(row["error"].get<std::string>(), "solution")) << row.dump();
    }
  }

  // Usage errors name what to do.
  r = run_kforge("eval --solutions '" + dir.string() + "' --results '" + (dir / "x.jsonl").string() + "' " +
                 config_arg());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--task")) << r.output;
  r = run_kforge("eval --solutions '" + (dir / "pairs.txt").string() + "' " + config_arg());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--results")) << r.output;
}

TEST(CliTest, ServeRefusesATaskSetWithATaskNoSolutionCanPass) {
  const fs::path dir = fs::path(KFORGE_BINARY_DIR) / "tests/cli/serve-invalid-tasks";
  kforge::remove_tree(dir);
  fs::create_directories(dir);
  fs::copy_file(kData / "scale_bias_relu.json", dir / "a.json");
  fs::copy_file(kData / "nan_reference.json", dir / "b.json");
  // `timeout` only keeps a server that wrongly started from hanging the test.
  const CmdResult r = run_kforge("serve --bind tcp://127.0.0.1:0 --tasks '" + dir.string() + "' " + config_arg(),
                                 /*merge_stderr=*/true, "timeout 120");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "1 of 2 tasks")) << r.output;
  EXPECT_TRUE(has(r.output, "task 'test/nan_reference': node 1 (log -> t1)")) << r.output;
  EXPECT_FALSE(has(r.output, "\"endpoint\"")) << r.output;
}

TEST(CliTest, BadInputsGiveClearErrorsAndExitCode2) {
  CmdResult r = run_kforge("task check '" + (kData / "bad_input.json").string() + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "bad_input.json")) << r.output;
  EXPECT_TRUE(has(r.output, "tolerence")) << r.output;
  EXPECT_TRUE(has(r.output, "did you mean \"tolerance\"")) << r.output;

  r = run_kforge("eval --task /nonexistent/task.json " + solution_arg("correct") + " " + config_arg());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "/nonexistent/task.json: no such file")) << r.output;

  r = run_kforge("eval " + task_arg() + " --solution /nonexistent/s.cpp " + config_arg());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "/nonexistent/s.cpp")) << r.output;

  r = run_kforge("eval " + task_arg() + " " + solution_arg("correct") + " --config nosuchpreset");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "no environment preset \"nosuchpreset\"")) << r.output;

  r = run_kforge("eval " + task_arg() + " " + solution_arg("correct") + " --backend tpu");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "tpu")) << r.output;

  r = run_kforge("eval " + task_arg());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "--solution")) << r.output;

  r = run_kforge("frobnicate");
  EXPECT_EQ(r.code, 2) << r.output;
}

TEST(CliTest, SystemFailureExitsWith3) {
  const fs::path dir = fs::path(KFORGE_BINARY_DIR) / "tests/cli";
  fs::create_directories(dir / "empty-tools-dir");
  const fs::path config = dir / "no-judge.yaml";
  {
    FILE* f = std::fopen(config.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f, "backend: cpu\nexecutor:\n  tools_dir: empty-tools-dir\n");
    std::fclose(f);
  }
  const CmdResult r =
      run_kforge("eval " + task_arg() + " " + solution_arg("correct") + " --config '" + config.string() + "'");
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(has(r.output, "the environment failed")) << r.output;
}

TEST(CliTest, EveryCommandHasHelp) {
  for (const std::string cmd :
       {"", "eval", "task", "task render", "task check", "task baseline", "task prompt", "demo", "serve"}) {
    const CmdResult r = run_kforge(cmd + " --help");
    EXPECT_EQ(r.code, 0) << cmd << ": " << r.output;
    EXPECT_TRUE(has(r.output, "Usage")) << cmd << ": " << r.output;
  }
  EXPECT_TRUE(has(run_kforge("--help").output, "Exit codes"));
}

TEST(CliTest, TaskPromptShowsWhatThePolicyReads) {
  const CmdResult r = run_kforge("task prompt '" + (kData / "scale_bias_relu.json").string() + "' " + config_arg());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "=== system")) << r.output;
  EXPECT_TRUE(has(r.output, "=== user")) << r.output;
  EXPECT_TRUE(has(r.output, "kf_forward")) << r.output;
}

TEST(CliTest, DemoEvaluatesEveryExample) {
  // A small examples tree in the layout of examples/: <task>/task.json and
  // <task>/cpu/*.cpp.
  const fs::path root = fs::path(KFORGE_BINARY_DIR) / "tests/cli/demo-examples";
  kforge::remove_tree(root);
  fs::create_directories(root / "scale_bias_relu/cpu");
  fs::copy_file(kData / "scale_bias_relu.json", root / "scale_bias_relu/task.json");
  fs::copy_file(kData / "correct.cpp", root / "scale_bias_relu/cpu/correct.cpp");
  fs::copy_file(kData / "wrong.cpp", root / "scale_bias_relu/cpu/wrong.cpp");
  const CmdResult r = run_kforge("demo --examples '" + root.string() + "' --backends cpu " + config_arg());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "verdict")) << r.output;
  EXPECT_TRUE(has(r.output, "correct.cpp")) << r.output;
  EXPECT_TRUE(has(r.output, "wrong.cpp")) << r.output;
  EXPECT_TRUE(has(r.output, "2 solution(s)")) << r.output;

  const CmdResult empty =
      run_kforge("demo --examples '" + (root / "scale_bias_relu/cpu").string() + "' " + config_arg());
  EXPECT_EQ(empty.code, 2) << empty.output;
  EXPECT_TRUE(has(empty.output, "no examples found")) << empty.output;
}

}  // namespace
