// The judge's `reference` request end to end through the Executor: the
// task's reference alone on a real kforge-judge (CPU backend), checked node
// by node and timed with the protocol of the speedup's denominator.
#include "kforge/env/reference_probe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>

#include "candidates.h"
#include "kforge/env/executor.h"
#include "test_support.h"

namespace kforge::env {
namespace {

namespace cand = testing::candidates;

TaskSpec fixture(const std::string& name) {
  return load_task(std::filesystem::path(KFORGE_SOURCE_DIR) / "tests/gym/data" / (name + ".json"));
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class ReferenceProbeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ExecutorConfig config;
    config.backend = BackendKind::kCpu;
    executor_ = make_executor(config).release();
  }
  static void TearDownTestSuite() {
    delete executor_;
    executor_ = nullptr;
  }

  static ReferenceReport probe(const TaskSpec& task, bool check = true, bool time = false,
                               EvalOptions options = testing::quick_options()) {
    ReferenceRequest req;
    req.task = task;
    req.check = check;
    req.time = time;
    req.options = options;
    return executor_->submit_reference(std::move(req)).get();
  }

  static Executor* executor_;
};

Executor* ReferenceProbeTest::executor_ = nullptr;

TEST_F(ReferenceProbeTest, NanReferenceIsInvalidAndNamesTheNodeThatProducedIt) {
  const ReferenceReport r = probe(fixture("nan_reference"));
  ASSERT_EQ(r.status, ReferenceStatus::kInvalid) << r.problem;
  // Node 0 (neg) is finite; log is where the NaNs start; y only inherits them.
  EXPECT_EQ(r.problem.rfind("node 1 (log -> t1): ", 0), 0u) << r.problem;
  EXPECT_TRUE(has(r.problem, " of 4096 elements are NaN on the base shape (x: [64, 64])")) << r.problem;
  EXPECT_TRUE(has(r.problem, "task output y is computed from it")) << r.problem;
  EXPECT_TRUE(has(r.problem, "every candidate would be judged against a NaN reference")) << r.problem;
  // The base shape was enough to refuse it; its statistics are in the report.
  ASSERT_EQ(r.nodes.size(), 1u) << r.nodes.dump();
  const json& nodes = r.nodes[0]["nodes"];
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0]["finite"], 4096);
  EXPECT_EQ(nodes[0]["nan"], 0);
  EXPECT_FALSE(nodes[0]["near_constant"].get<bool>());
  // log of a negated standard normal: NaN wherever x > 0, about half.
  const int64_t nan = nodes[1]["nan"].get<int64_t>();
  EXPECT_GT(nan, 1500);
  EXPECT_LT(nan, 2600);
  EXPECT_EQ(nodes[1]["finite"].get<int64_t>(), 4096 - nan);
  EXPECT_TRUE(has(r.problem, std::to_string(nan) + " of 4096 elements are NaN")) << r.problem;
  EXPECT_EQ(nodes[2]["nan"], nan);
  EXPECT_TRUE(nodes[2]["output"].get<bool>());
  EXPECT_FALSE(nodes[1]["output"].get<bool>());
  EXPECT_EQ(r.device, executor_->device_name());
  EXPECT_FALSE(r.timing.has_value());
}

TEST_F(ReferenceProbeTest, ConstantOutputIsInvalidAndNamesTheNodeThatMadeItConstant) {
  const ReferenceReport r = probe(fixture("constant_reference"));
  ASSERT_EQ(r.status, ReferenceStatus::kInvalid) << r.problem;
  // relu(x) varies; sub(t0, t0) is where the output stops carrying information.
  EXPECT_EQ(r.problem.rfind("node 1 (sub -> t1): the output is constant (standard deviation 0", 0), 0u) << r.problem;
  EXPECT_TRUE(has(r.problem, "on the base shape (x: [64, 64])")) << r.problem;
  EXPECT_TRUE(has(r.problem, "task output y is computed from it and is constant")) << r.problem;
  EXPECT_TRUE(has(r.problem, "a kernel that writes a constant would pass verification")) << r.problem;
  const json& nodes = r.nodes[0]["nodes"];
  EXPECT_FALSE(nodes[0]["near_constant"].get<bool>());
  EXPECT_TRUE(nodes[1]["near_constant"].get<bool>());
  EXPECT_TRUE(nodes[2]["near_constant"].get<bool>());
  EXPECT_EQ(nodes[2]["std"], 0.0);
}

TEST_F(ReferenceProbeTest, ConstantTaskOutputNamesItselfWhenNothingBeforeItIsConstant) {
  // sign(exp(x)) is all ones: exp varies, sign is the node that flattens it.
  const TaskSpec task = testing::task_from_json(R"({
    "id": "test/sign_of_exp",
    "inputs": [{"name": "x", "shape": [256], "dtype": "float32", "init": "normal"}],
    "nodes": [{"op": "exp", "in": ["x"], "out": "t0"}, {"op": "sign", "in": ["t0"], "out": "y"}],
    "outputs": ["y"]})");
  const ReferenceReport r = probe(task);
  ASSERT_EQ(r.status, ReferenceStatus::kInvalid) << r.problem;
  EXPECT_EQ(r.problem.rfind("node 1 (sign -> y): the output is constant", 0), 0u) << r.problem;
  EXPECT_TRUE(has(r.problem, "it is task output y, so a kernel that writes a constant would pass")) << r.problem;
}

TEST_F(ReferenceProbeTest, ValidTaskReportsEveryNodeOfEveryShapeCase) {
  const ReferenceReport r = probe(testing::elementwise_chain_task(4096, {8192, 100}));
  ASSERT_EQ(r.status, ReferenceStatus::kOk) << r.problem;
  EXPECT_TRUE(r.problem.empty());
  ASSERT_EQ(r.nodes.size(), 3u);  // base shape + 2 variants
  const int64_t numel[] = {4096, 8192, 100};
  for (size_t c = 0; c < 3; ++c) {
    EXPECT_EQ(r.nodes[c]["variant"], static_cast<int>(c) - 1);
    EXPECT_EQ(r.nodes[c]["shapes"]["x"], json::array({numel[c]}));
    ASSERT_EQ(r.nodes[c]["nodes"].size(), 3u);
    for (const auto& n : r.nodes[c]["nodes"]) {
      EXPECT_EQ(n["numel"], numel[c]) << n.dump();
      EXPECT_EQ(n["finite"], numel[c]) << n.dump();
      EXPECT_GT(n["std"].get<double>(), 0.0) << n.dump();
      EXPECT_FALSE(n["near_constant"].get<bool>()) << n.dump();
    }
  }
  EXPECT_EQ(r.nodes[1]["label"], "shape variant 0");
  EXPECT_TRUE(r.phase_ms.contains("check"));
  EXPECT_TRUE(r.phase_ms.contains("total"));
}

TEST_F(ReferenceProbeTest, SingleElementOutputIsCheckedForNanOnly) {
  // A full reduction (a loss, a norm) has no spread to measure: valid.
  const TaskSpec task = testing::task_from_json(R"({
    "id": "test/full_sum",
    "inputs": [{"name": "x", "shape": [64, 64], "dtype": "float32", "init": "normal"}],
    "nodes": [{"op": "square", "in": ["x"], "out": "t0"}, {"op": "sum", "in": ["t0"], "out": "y"}],
    "outputs": ["y"]})");
  const ReferenceReport r = probe(task);
  ASSERT_EQ(r.status, ReferenceStatus::kOk) << r.problem;
  const json& y = r.nodes[0]["nodes"][1];
  EXPECT_EQ(y["numel"], 1);
  EXPECT_TRUE(y["near_constant"].is_null()) << y.dump();
}

TEST_F(ReferenceProbeTest, ProblemOnlyOnAShapeVariantNamesTheVariant) {
  const TaskSpec task = testing::task_from_json(R"({
    "id": "test/variant_reduces_to_constant",
    "inputs": [{"name": "x", "shape": [8, 16], "dtype": "float32", "init": "normal"}],
    "nodes": [{"op": "softmax", "in": ["x"], "out": "y", "attrs": {"dim": 1}}],
    "outputs": ["y"],
    "shape_variants": [{"x": [8, 1]}]})");
  // Softmax over a dim of size 1 is 1 everywhere: constant on the variant only.
  const ReferenceReport r = probe(task);
  ASSERT_EQ(r.status, ReferenceStatus::kInvalid) << r.problem;
  EXPECT_EQ(r.problem.rfind("node 0 (softmax -> y): the output is constant", 0), 0u) << r.problem;
  EXPECT_TRUE(has(r.problem, "on shape variant 0 (x: [8, 1])")) << r.problem;
  ASSERT_EQ(r.nodes.size(), 2u);
  EXPECT_FALSE(r.nodes[0]["nodes"][0]["near_constant"].get<bool>());
  EXPECT_TRUE(r.nodes[1]["nodes"][0]["near_constant"].get<bool>());
}

TEST_F(ReferenceProbeTest, TimedReferenceUsesTheSpeedupDenominatorsProtocol) {
  const TaskSpec task = testing::elementwise_chain_task(1 << 16);
  EvalOptions o = testing::quick_options();
  o.min_samples = 8;
  const ReferenceReport r = probe(task, /*check=*/true, /*time=*/true, o);
  ASSERT_EQ(r.status, ReferenceStatus::kOk) << r.problem;
  ASSERT_TRUE(r.timing.has_value());
  const json& t = *r.timing;
  EXPECT_EQ(t["timer"], "cpu_time") << t.dump();  // the CPU backend's primary clock, as for candidates
  EXPECT_GE(t["samples"].get<int>(), o.min_samples) << t.dump();
  EXPECT_LE(t["samples"].get<int>(), o.max_samples) << t.dump();
  const double median = t["median_ms"].get<double>();
  EXPECT_GT(median, 0.0);
  EXPECT_LE(t["p25_ms"].get<double>(), median);
  EXPECT_GE(t["p75_ms"].get<double>(), median);
  EXPECT_GT(t["mean_ms"].get<double>(), 0.0);
  const std::set<std::string> stop_rules = {"converged", "time_cap", "sample_cap", "eval_timeout"};
  EXPECT_EQ(stop_rules.count(t["stop_reason"].get<std::string>()), 1u) << t.dump();
  EXPECT_GE(t["warmup_rounds"].get<int>(), 1);
  EXPECT_GT(t["cache_flush_bytes"].get<uint64_t>(), 0u);
  EXPECT_TRUE(t["clocks"].is_object());
  EXPECT_TRUE(t["wall"].is_object());
  EXPECT_EQ(t["shapes"]["x"], json::array({1 << 16}));
  EXPECT_EQ(t["device"], executor_->device_name());
  EXPECT_TRUE(r.phase_ms.contains("time"));

  // The same denominator a candidate's speedup uses: the reference side of a
  // timed evaluation of the same task, in the same process, on the same
  // clock. Both are medians of the same work, so they agree within noise.
  EvalRequest eval;
  eval.task = task;
  eval.artifact = testing::artifact_for(testing::compile_candidate(cand::kChainCorrect));
  eval.time = true;
  eval.options = o;
  const EvalReport e = executor_->submit(std::move(eval)).get();
  ASSERT_EQ(e.outcome, Outcome::kCorrect) << e.summary;
  ASSERT_TRUE(e.timing.has_value()) << e.summary;
  EXPECT_EQ(e.timing->timer, t["timer"].get<std::string>());
  const double eval_median = e.timing->reference.median_ms;
  EXPECT_GT(median, eval_median / 4) << t.dump() << "\n" << to_json(*e.timing).dump();
  EXPECT_LT(median, eval_median * 4) << t.dump() << "\n" << to_json(*e.timing).dump();
}

TEST_F(ReferenceProbeTest, InvalidTaskIsNotTimed) {
  const ReferenceReport r = probe(fixture("nan_reference"), /*check=*/true, /*time=*/true);
  ASSERT_EQ(r.status, ReferenceStatus::kInvalid) << r.problem;
  EXPECT_FALSE(r.timing.has_value());
}

TEST_F(ReferenceProbeTest, CheckTaskRunsOncePerTaskContent) {
  const int before = executor_->reference_checks();
  const int judge_before = executor_->health()["reference_requests"].get<int>();
  TaskSpec task = testing::elementwise_chain_task(512);
  task.id = "test/check_once";
  const ReferenceReport first = executor_->check_task(task, EvalOptions{}).get();
  ASSERT_TRUE(first.ok()) << first.problem;
  const ReferenceReport second = executor_->check_task(task, EvalOptions{}).get();
  EXPECT_TRUE(second.ok());
  EXPECT_EQ(executor_->reference_checks(), before + 1);
  EXPECT_EQ(executor_->health()["reference_requests"].get<int>(), judge_before + 1);

  // Other content (here only the id differs) is another task: checked again.
  task.id = "test/check_once_renamed";
  EXPECT_TRUE(executor_->check_task(task, EvalOptions{}).get().ok());
  EXPECT_EQ(executor_->reference_checks(), before + 2);

  // An invalid verdict is kept like a valid one.
  const TaskSpec bad = fixture("constant_reference");
  EXPECT_TRUE(executor_->check_task(bad, EvalOptions{}).get().invalid());
  EXPECT_TRUE(executor_->check_task(bad, EvalOptions{}).get().invalid());
  EXPECT_EQ(executor_->reference_checks(), before + 3);
  EXPECT_EQ(executor_->health()["reference_requests"].get<int>(), judge_before + 3);
}

TEST_F(ReferenceProbeTest, ReportRoundTripsThroughJson) {
  const ReferenceReport r = probe(fixture("nan_reference"));
  const ReferenceReport back = reference_report_from_json(to_json(r));
  EXPECT_EQ(back.status, r.status);
  EXPECT_EQ(back.problem, r.problem);
  EXPECT_EQ(back.nodes, r.nodes);
  EXPECT_EQ(back.device, r.device);
  EXPECT_FALSE(back.timing.has_value());
  EXPECT_THROW(reference_report_from_json({{"status", "maybe"}}), InputError);
  EXPECT_THROW(reference_request_from_json({{"task", to_json(fixture("nan_reference"))}, {"chek", true}}), InputError);
}

// Tasks too large or too slow for a judge get a verdict with figures, before
// anything runs, never a system error (KernelBench problems at their own
// sizes used to be a SIGKILLed judge or a timeout). The judge's limits
// are fixed here so that the figures read the same on every machine.
TEST_F(ReferenceProbeTest, KernelBenchReluAtItsOwnSizeIsRefusedNamingItsNeedAndTheLimit) {
  EvalOptions o = testing::quick_options();
  o.judge_memory_limit_bytes = uint64_t{8} << 30;
  const ReferenceReport r = probe(fixture("kernelbench_level1_19_relu_full_size"), true, false, o);
  ASSERT_EQ(r.status, ReferenceStatus::kInvalid) << r.problem;
  // x and y (6 GiB each) and the measurement's float64 copy of y.
  EXPECT_EQ(r.problem,
            "the task is too large for a judge on the cpu backend: checking its reference needs about 24.0 GiB of "
            "memory (the base shape), and the judge may use 8.0 GiB (judge_memory_limit_bytes): shrink its shapes or "
            "check it with --backend cuda");
  EXPECT_TRUE(r.nodes.empty()) << "nothing ran: " << r.nodes.dump();
}

TEST_F(ReferenceProbeTest, AReferenceTooSlowEvenAtPeakRatesIsRefusedBeforeItRuns) {
  // KernelBench level2/40: a 16384 x 4096 x 4096 GEMM, 550 GFLOP a call; the
  // check of one case needs at least 2.7 s at 0.2 TFLOP/s.
  EvalOptions o = testing::quick_options();
  o.judge_memory_limit_bytes = uint64_t{64} << 30;
  o.eval_timeout_ms = 2000;
  const auto start = std::chrono::steady_clock::now();
  const ReferenceReport r = probe(fixture("kernelbench_level2_40_matmul_full_size"), true, false, o);
  ASSERT_EQ(r.status, ReferenceStatus::kInvalid) << r.problem;
  EXPECT_EQ(r.problem,
            "the task's reference is too slow for a judge on the cpu backend: checking its reference takes at least "
            "2.7 s even at the device's peak rates, and a request may take 2.0 s (eval_timeout_ms): shrink its shapes "
            "or check it with --backend cuda");
  EXPECT_TRUE(r.nodes.empty());
  RecordProperty(
      "refusal_ms",
      std::to_string(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()));
}

TEST_F(ReferenceProbeTest, AReferenceSlowerThanItsBoundIsStoppedBetweenCasesWithWhatItTook) {
  // Eight transcendental ops over 8M floats: at the bound's rates well under
  // a millisecond per case, on one real CPU thread tens of milliseconds; the
  // request may take 50 ms (above what 5 seeds need at peak rates), so the
  // second of three cases does not start.
  json nodes = json::array();
  std::string prev = "x";
  for (int i = 0; i < 8; ++i) {
    const std::string out = i == 7 ? "y" : "t" + std::to_string(i);
    nodes.push_back({{"op", i % 2 == 0 ? "tanh" : "exp"}, {"in", {prev}}, {"out", out}});
    prev = out;
  }
  const json j = {{"id", "test/slow_pointwise"},
                  {"inputs", {{{"name", "x"}, {"shape", {8, 1048576}}, {"dtype", "float32"}, {"init", "normal"}}}},
                  {"nodes", nodes},
                  {"outputs", {"y"}},
                  {"shape_variants", {{{"x", {8, 1048576}}}, {{"x", {4, 1048576}}}}}};
  EvalOptions o = testing::quick_options();
  o.eval_timeout_ms = 50;
  const ReferenceReport r = probe(parse_task(Document::from_json_text(j.dump(), "<slow task>")), true, false, o);
  ASSERT_EQ(r.status, ReferenceStatus::kInvalid) << r.problem;
  EXPECT_EQ(r.problem.rfind("the task's reference is too slow for a judge on the cpu backend: it took ", 0), 0u)
      << r.problem;
  EXPECT_TRUE(
      has(r.problem, " for 1 of 3 shape cases, more than half of the 50 ms a request may take (eval_timeout_ms)"))
      << r.problem;
  EXPECT_EQ(r.nodes.size(), 1u) << "the first case ran: " << r.nodes.dump();
}

TEST(ReferenceProbeSetup, MissingToolsGiveAnErrorReportThatIsNotKept) {
  const std::filesystem::path empty = std::filesystem::path(KFORGE_BINARY_DIR) / "tests/exec/no-tools-here";
  std::filesystem::create_directories(empty);
  ExecutorConfig config;
  config.tools_dir = empty;
  std::unique_ptr<Executor> executor = make_executor(config);
  const TaskSpec task = testing::elementwise_chain_task(64);
  const ReferenceReport r = executor->check_task(task, EvalOptions{}).get();
  EXPECT_EQ(r.status, ReferenceStatus::kError);
  EXPECT_EQ(r.problem.rfind("system error: ", 0), 0u) << r.problem;
  EXPECT_TRUE(has(r.problem, "kforge-judge")) << r.problem;
  // Not cached: a second call asks again (and gets a fresh error).
  EXPECT_EQ(executor->check_task(task, EvalOptions{}).get().status, ReferenceStatus::kError);
  ReferenceRequest req;
  req.task = task;
  EXPECT_EQ(executor->submit_reference(req).get().status, ReferenceStatus::kError);
}

}  // namespace
}  // namespace kforge::env
