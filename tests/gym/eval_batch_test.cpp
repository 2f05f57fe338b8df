// The resumable batch (kforge/env/eval_batch.h) without the CLI: pairs are
// keyed by content, a rerun skips what the results file already scored, an
// edited solution is a new pair, a row with a system error and a torn last
// row are evaluated again, a time limit leaves pairs unstarted for a rerun,
// and a results file of something else is refused.
// Real compiles and judge/runner processes on the CPU backend.
#include "kforge/env/eval_batch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "gym_test_util.h"
#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"

namespace kforge::env {
namespace {

namespace fs = std::filesystem;

class EvalBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kforge-eval-batch-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    kforge::remove_tree(dir_);
    fs::create_directories(dir_ / "solutions");
    options_.solutions = dir_ / "solutions";
    options_.task = testing::data_dir() / "scale_bias_relu.json";
    options_.results = dir_ / "results.jsonl";
  }
  void TearDown() override { kforge::remove_tree(dir_); }

  void add_solution(const std::string& name, const std::string& as) {
    fs::copy_file(testing::data_dir() / (name + ".cpp"), dir_ / "solutions" / as, fs::copy_options::overwrite_existing);
  }

  // Runs the batch, counting what the observer was told.
  EvalBatchResult run() {
    started_ = 0;
    rows_seen_ = 0;
    EvalBatchObserver observer;
    observer.on_start = [&](size_t n) { started_ = n; };
    observer.on_row = [&](const json&) { ++rows_seen_; };
    return run_eval_batch(options_, testing::fast_config(), observer);
  }

  std::vector<json> result_lines() const {
    std::ifstream in(options_.results);
    std::vector<json> rows;
    std::string line;
    while (std::getline(in, line)) rows.push_back(json::parse(line));
    return rows;
  }

  static std::map<std::string, std::string> verdicts(const EvalBatchResult& r) {
    std::map<std::string, std::string> v;
    for (const json& row : r.rows) {
      v[fs::path(row["solution"].get<std::string>()).filename().string()] = row["verdict"].get<std::string>();
    }
    return v;
  }

  fs::path dir_;
  EvalBatchOptions options_;
  size_t started_ = 0, rows_seen_ = 0;
};

TEST_F(EvalBatchTest, PairsAreKeyedByContentNotByFileName) {
  add_solution("correct", "a.cpp");
  add_solution("correct", "b.cpp");
  add_solution("wrong", "c.cpp");
  std::vector<EvalBatchPair> pairs = read_batch_pairs(options_, SolutionMode::kCpp);
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0].label, "scale_bias_relu.json a.cpp");
  EXPECT_EQ(pairs[0].key, pairs[1].key) << "the same content under two names is one pair";
  EXPECT_NE(pairs[0].key, pairs[2].key);
  const std::string before = pairs[2].key;
  std::ofstream(dir_ / "solutions" / "c.cpp", std::ios::app) << "\n// edited\n";
  pairs = read_batch_pairs(options_, SolutionMode::kCpp);
  EXPECT_NE(pairs[2].key, before) << "an edited solution is a new pair";
  EXPECT_EQ(pairs[0].key.size(), 64u) << "sha256 hex";
}

TEST_F(EvalBatchTest, AResumeSkipsScoredPairsAndEvaluatesChangedOnes) {
  add_solution("correct", "correct.cpp");
  add_solution("wrong", "wrong.cpp");
  EvalBatchResult r = run();
  EXPECT_EQ(started_, 2u);
  EXPECT_EQ(rows_seen_, 2u);
  EXPECT_EQ(r.evaluated_now, 2u);
  EXPECT_EQ(r.from_earlier, 0u);
  EXPECT_EQ(verdicts(r), (std::map<std::string, std::string>{{"correct.cpp", "correct"}, {"wrong.cpp", "wrong"}}));
  EXPECT_EQ(r.summary["verdicts"]["correct"], 1) << r.summary.dump();
  EXPECT_EQ(r.summary["not_evaluated"], 0);
  ASSERT_EQ(result_lines().size(), 2u);

  // Nothing left to do: no row appended, the same rows reported.
  r = run();
  EXPECT_EQ(started_, 0u);
  EXPECT_EQ(rows_seen_, 0u);
  EXPECT_EQ(r.evaluated_now, 0u);
  EXPECT_EQ(r.from_earlier, 2u);
  EXPECT_EQ(r.summary["from_earlier_results"], 2);
  EXPECT_EQ(verdicts(r)["correct.cpp"], "correct");
  EXPECT_EQ(result_lines().size(), 2u);

  // An edited solution is a new pair: evaluated; its old row stays in the
  // file but is not part of this input's result.
  std::ofstream(dir_ / "solutions" / "wrong.cpp", std::ios::app) << "\n// edited\n";
  r = run();
  EXPECT_EQ(r.evaluated_now, 1u);
  EXPECT_EQ(r.from_earlier, 1u);
  EXPECT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(verdicts(r)["wrong.cpp"], "wrong");
  EXPECT_EQ(result_lines().size(), 3u);
}

// A batch past its time limit starts nothing more: pairs not started get no
// row (so none is mistaken for judged) and a rerun evaluates them.
TEST_F(EvalBatchTest, ATimeLimitStartsNothingMoreAndARerunEvaluatesTheRest) {
  add_solution("correct", "correct.cpp");
  add_solution("wrong", "wrong.cpp");
  options_.time_limit_s = 1e-9;  // over before the first pair could start
  EvalBatchResult r = run();
  EXPECT_EQ(started_, 2u);
  EXPECT_EQ(rows_seen_, 0u);
  EXPECT_TRUE(r.rows.empty());
  EXPECT_EQ(r.evaluated_now, 0u);
  EXPECT_EQ(r.summary["not_started"], 2) << r.summary.dump();
  EXPECT_EQ(result_lines().size(), 0u);

  options_.time_limit_s = 0;
  r = run();
  EXPECT_EQ(r.evaluated_now, 2u);
  EXPECT_EQ(r.summary["not_started"], 0) << r.summary.dump();
  EXPECT_EQ(verdicts(r), (std::map<std::string, std::string>{{"correct.cpp", "correct"}, {"wrong.cpp", "wrong"}}));
}

TEST_F(EvalBatchTest, SystemErrorsAndATornLastRowAreEvaluatedAgain) {
  add_solution("correct", "correct.cpp");
  add_solution("wrong", "wrong.cpp");
  const std::vector<EvalBatchPair> pairs = read_batch_pairs(options_, SolutionMode::kCpp);
  ASSERT_EQ(pairs.size(), 2u);
  // An earlier run: the correct pair failed with a system error, the wrong
  // one was scored, and a kill tore a third row.
  {
    std::ofstream out(options_.results);
    out << json{{"key", pairs[0].key}, {"verdict", "error: system"}, {"system_error", true}, {"evaluated", false}}
               .dump()
        << "\n"
        << json{{"key", pairs[1].key},
                {"label", "earlier"},
                {"verdict", "wrong"},
                {"system_error", false},
                {"evaluated", true}}
               .dump()
        << "\n"
        << R"({"key": "to)";
  }
  const EvalBatchResult r = run();
  EXPECT_EQ(started_, 1u);
  EXPECT_EQ(r.evaluated_now, 1u);
  EXPECT_EQ(r.from_earlier, 1u);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0]["verdict"], "correct");
  EXPECT_EQ(r.rows[1]["label"], "earlier") << "the scored row is taken as it was";
  // The torn row was cut off, not glued to the new one: every line parses.
  const std::vector<json> lines = result_lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2]["key"], pairs[0].key);
}

TEST_F(EvalBatchTest, BadInputGetsARowAndNoEvaluation) {
  std::ofstream(dir_ / "pairs.txt") << "# a comment\n"
                                    << (testing::data_dir() / "scale_bias_relu.json").string() << " missing.cpp\n";
  options_.solutions = dir_ / "pairs.txt";
  options_.task.clear();
  const EvalBatchResult r = run();
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0]["verdict"], "bad input");
  EXPECT_FALSE(r.rows[0]["evaluated"].get<bool>());
  EXPECT_EQ(r.summary["not_evaluated"], 1);
  EXPECT_EQ(r.evaluated_now, 0u);
}

TEST_F(EvalBatchTest, AResultsFileOfSomethingElseIsRefused) {
  add_solution("correct", "correct.cpp");
  std::ofstream(options_.results) << R"({"trajectory": 1})"
                                  << "\n";
  try {
    run();
    FAIL() << "a results file without keys was appended to";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("results.jsonl:1"), std::string::npos) << what;
    EXPECT_NE(what.find("\"key\""), std::string::npos) << what;
  }
}

TEST_F(EvalBatchTest, AListLineOfThreeWordsNamesTheLine) {
  std::ofstream(dir_ / "pairs.txt") << "\n\na b c\n";
  options_.solutions = dir_ / "pairs.txt";
  try {
    read_batch_pairs(options_, SolutionMode::kCpp);
    FAIL() << "three words were read as a pair";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pairs.txt:3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kforge::env
