// The synchronous Env end to end on the CPU backend: real compiles through
// the compile service, real judge and runner processes.
#include "kforge/env/env.h"

#include <gtest/gtest.h>

#include <sstream>

#include "gym_test_util.h"
#include "kforge/env/analysis.h"
#include "kforge/env/step_info.h"

namespace kforge::env {
namespace {

using testing::candidate;
using testing::make_action;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// An analysis plugin for C++ solutions (the built-in tools read CUDA
// binaries, so the CPU backend offers none): reports the source's size and
// the artifact's, which exercises the whole analyze path on this backend.
class SourceStatsTool : public AnalysisTool {
 public:
  std::string name() const override { return "source_stats"; }
  std::string description() const override { return "Lines of the solution's source and size of its build."; }
  json parameters() const override {
    return {{"type", "object"},
            {"properties", {{"verbose", {{"type", "boolean"}, {"description", "also list the longest line"}}}}},
            {"additionalProperties", false}};
  }
  std::vector<SolutionMode> modes() const override { return {SolutionMode::kCpp}; }
  void validate_args(const json& args) const override {
    Document doc = Document::from_value(args, "<source_stats arguments>");
    ObjectReader r = doc.root_object();
    if (auto f = r.optional("verbose")) f->as_bool();
    r.finish();
  }
  AnalysisResult run(const AnalysisInput& in) const override {
    AnalysisResult r;
    r.ok = true;
    std::istringstream src(in.solution->source);
    std::string line;
    int lines = 0;
    while (std::getline(src, line)) ++lines;
    r.facts = {{"lines", lines}, {"artifact_bytes", std::filesystem::file_size(in.artifact->path)}};
    r.text = "source_stats: " + std::to_string(lines) + " lines";
    r.hints.push_back("keep kf_forward short");
    return r;
  }
};

void register_source_stats() {
  static const bool registered = [] {
    AnalysisRegistry::global().add(std::make_shared<const SourceStatsTool>());
    return true;
  }();
  (void)registered;
}

// Every step's info carries the same bookkeeping, whatever happened, and its
// wire form (the server's reply) has every key and reads back to an equal
// struct.
void expect_complete_info(const StepResult& r) {
  const StepInfo& info = r.info;
  EXPECT_DOUBLE_EQ(info.reward_components.total, r.reward);
  EXPECT_EQ(info.final, r.terminated || r.truncated);
  EXPECT_GE(info.timings.step_ms, 0.0);
  EXPECT_GE(info.budget.max_turns, info.budget.turns_used);
  const json wire = to_json(r);
  ASSERT_TRUE(wire["info"].contains("reward_components")) << wire.dump(2);
  EXPECT_DOUBLE_EQ(wire["info"]["reward_components"]["total"].get<double>(), r.reward);
  EXPECT_TRUE(wire["info"]["measurement"].contains("outcome"));
  for (const char* key : {"compile_ms", "eval_ms", "step_ms", "env_ms", "queue_ms"}) {
    EXPECT_TRUE(wire["info"]["timings"][key].is_number()) << key;
  }
  EXPECT_TRUE(wire["info"]["cache_hit"].is_boolean());
  EXPECT_TRUE(wire["info"]["budget"]["turns_used"].is_number());
  EXPECT_EQ(wire["reward"], r.reward);
  EXPECT_EQ(wire["observation"]["text"], r.observation.text);
  // What the server sent reads back to the same struct and the same bytes.
  EXPECT_EQ(to_json(step_info_from_json(wire["info"])), wire["info"]);
}

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::fast_config();
    task_ = testing::test_task();
  }
  Env& env() {
    if (!env_) env_ = std::make_unique<Env>(config_);
    return *env_;
  }

  EnvConfig config_;
  TaskSpec task_;
  std::unique_ptr<Env> env_;
};

TEST_F(EnvTest, ResetProducesACompletePrompt) {
  const ResetResult r = env().reset(task_, 7);
  const std::string& text = r.observation.text;
  EXPECT_TRUE(has(text, "class Model")) << "the PyTorch code";
  EXPECT_TRUE(has(text, "def get_inputs")) << "the PyTorch code";
  EXPECT_TRUE(has(text, "int kf_forward(const kf_tensor* inputs")) << "the ABI header";
  EXPECT_TRUE(has(text, "| inputs[0] | x | input | [64, 32]")) << "the ABI table";
  EXPECT_TRUE(has(text, "x [17, 32] -> y [17, 32]")) << "the shape variants";
  EXPECT_TRUE(has(text, "Workflow that wins")) << "the skills guide (configs/skills/cpu.md)";
  const json& data = r.observation.data;
  ASSERT_EQ(data["messages"].size(), 2u);
  EXPECT_EQ(data["messages"][0]["role"], "system");
  std::vector<std::string> tools;
  for (const auto& t : data["tools"]) tools.push_back(t["function"]["name"]);
  ASSERT_GE(tools.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(tools.begin(), tools.begin() + 4),
            (std::vector<std::string>{"compile", "verify", "profile", "submit"}));
  EXPECT_EQ(r.info.seed, 7);
  EXPECT_EQ(r.info.task_id, "test/scale_bias_relu");
}

TEST_F(EnvTest, CorrectSubmitEarnsAPositiveRewardAndEndsTheEpisode) {
  env().reset(testing::timed_test_task());
  const StepResult r = env().step(make_action(ActionType::kSubmit, "correct"));
  expect_complete_info(r);
  EXPECT_TRUE(r.terminated);
  EXPECT_FALSE(r.truncated);
  EXPECT_GT(r.reward, 0.0) << r.observation.text;
  EXPECT_EQ(outcome_name(r.info.measurement.outcome), "correct");
  ASSERT_TRUE(r.info.measurement.speedup_eager.has_value());
  EXPECT_GT(*r.info.measurement.speedup_eager, 0.0);
  ASSERT_TRUE(r.info.eval_report && r.info.eval_report->timing);
  EXPECT_TRUE(to_json(r.info)["eval_report"]["timing"]["candidate"].contains("p25_ms"));
  EXPECT_TRUE(has(r.observation.text, "Correct")) << r.observation.text;
  EXPECT_TRUE(has(r.observation.text, "p25-p75")) << r.observation.text;
  EXPECT_TRUE(r.info.final);
  // Gymnasium: the episode is over; stepping it again is the caller's error.
  EXPECT_THROW(env().step(make_action(ActionType::kCompile, "correct")), InputError);
}

TEST_F(EnvTest, WrongCandidateGetsMismatchStatistics) {
  env().reset(task_);
  const StepResult r = env().step(make_action(ActionType::kVerify, "wrong"));
  expect_complete_info(r);
  EXPECT_FALSE(r.terminated);
  EXPECT_EQ(outcome_name(r.info.measurement.outcome), "wrong");
  EXPECT_TRUE(has(r.observation.text, "Mismatch in")) << r.observation.text;
  ASSERT_TRUE(r.observation.data.contains("correctness")) << r.observation.data.dump(2);
  const json& failure = r.observation.data["correctness"]["failures"][0];
  EXPECT_GT(failure["max_abs_err"].get<double>(), 1e-5);
  // Only the per-step shaping is paid before the episode ends.
  EXPECT_LE(r.reward, 0.0);
  EXPECT_EQ(r.info.reward_components.components.size(), 1u) << "total and turn_cost";
  EXPECT_EQ(r.info.reward_components.to_json().size(), 2u) << "total and turn_cost";

  const StepResult s = env().step(make_action(ActionType::kSubmit));  // acts on the wrong solution
  EXPECT_TRUE(s.terminated);
  EXPECT_LT(s.reward, 0.0);
  EXPECT_EQ(outcome_name(s.info.measurement.outcome), "wrong");
}

TEST_F(EnvTest, CompileErrorReturnsDiagnostics) {
  env().reset(task_);
  const StepResult r = env().step(make_action(ActionType::kCompile, "compile_error"));
  expect_complete_info(r);
  EXPECT_EQ(outcome_name(r.info.measurement.outcome), "compile_error");
  EXPECT_EQ(r.info.measurement.compile_errors_so_far, 1);
  EXPECT_TRUE(has(r.observation.text, "Compilation failed")) << r.observation.text;
  EXPECT_TRUE(has(r.observation.text, "undeclared_scale")) << r.observation.text;
  EXPECT_FALSE(r.observation.data["compile"]["diagnostics"].get<std::string>().empty());
}

TEST_F(EnvTest, CrashIsAnObservationAndTheEnvKeepsWorking) {
  env().reset(task_);
  const StepResult r = env().step(make_action(ActionType::kVerify, "crash"));
  EXPECT_EQ(outcome_name(r.info.measurement.outcome), "crash") << r.observation.text;
  EXPECT_TRUE(r.observation.data.contains("crash")) << r.observation.data.dump(2);
  const StepResult next = env().step(make_action(ActionType::kVerify, "correct"));
  EXPECT_EQ(outcome_name(next.info.measurement.outcome), "correct") << next.observation.text;
}

TEST_F(EnvTest, ActionsWithoutSourceActOnTheLastSolution) {
  env().reset(task_);
  const StepResult first =
      env().step_tool_call({{"name", "compile"}, {"arguments", json{{"source", candidate("correct").source}}.dump()}});
  EXPECT_EQ(first.info.measurement.compiled, true) << first.observation.text;
  const StepResult second = env().step_tool_call({{"name", "verify"}, {"arguments", "{}"}});
  EXPECT_EQ(outcome_name(second.info.measurement.outcome), "correct") << second.observation.text;
  EXPECT_EQ(second.info.solution_hash, first.info.solution_hash);
  EXPECT_TRUE(second.info.cache_hit) << "the same solution is not compiled twice";
}

TEST_F(EnvTest, NoSolutionYetIsAnObservationThatCostsATurn) {
  env().reset(task_);
  const StepResult r = env().step_tool_call({{"name", "verify"}, {"arguments", "{}"}});
  expect_complete_info(r);
  EXPECT_EQ(testing::error_kind(r.info), "no_solution");
  EXPECT_TRUE(has(r.observation.text, "source")) << r.observation.text;
  EXPECT_EQ(r.info.budget.turns_used, 1);
  EXPECT_FALSE(r.terminated);
}

TEST_F(EnvTest, MalformedToolCallIsAnErrorObservation) {
  env().reset(task_);
  const StepResult r = env().step_tool_call({{"name", "verify"}, {"arguments", "{\"source\": \"int x"}});
  expect_complete_info(r);
  EXPECT_EQ(testing::error_kind(r.info), "invalid_action");
  EXPECT_TRUE(has(r.observation.text, "Invalid tool call")) << r.observation.text;
  EXPECT_TRUE(has(r.observation.text, "not valid JSON")) << r.observation.text;
  EXPECT_EQ(r.info.budget.turns_used, 1);

  const StepResult u = env().step_tool_call({{"name", "sumbit"}, {"arguments", "{}"}});
  EXPECT_TRUE(has(u.observation.text, "did you mean \"submit\"")) << u.observation.text;
  EXPECT_FALSE(u.terminated);
  EXPECT_EQ(u.info.budget.turns_used, 2);
}

// The call is echoed in info for small calls only: a 400 KB one doubled
// every reply of the server (bench/server --flood 4).
TEST_F(EnvTest, LargeToolCallsAreEchoedAsTheirSizeAndAPreview) {
  env().reset(task_);
  const json small = {{"name", "verify"}, {"arguments", "{}"}};
  EXPECT_EQ(env().step_tool_call(small).info.tool_call, small);
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const json large = {{"name", "compile"}, {"arguments", "\u00e9" + deep}};
  const StepResult r = env().step_tool_call(large);
  EXPECT_EQ(testing::error_kind(r.info), "invalid_action");
  EXPECT_TRUE(r.info.tool_call.is_null());
  EXPECT_FALSE(to_json(r.info).contains("tool_call"));
  const json& preview = r.info.tool_call_preview;
  EXPECT_EQ(preview["name"], "compile");
  const std::string& arguments = large["arguments"].get_ref<const std::string&>();
  EXPECT_EQ(preview["arguments_bytes"], arguments.size());
  const std::string head = preview["arguments"];
  EXPECT_LE(head.size(), 256u);
  EXPECT_GE(head.size(), 255u);  // cut at a character boundary (the 2-byte é comes first)
  EXPECT_EQ(arguments.rfind(head, 0), 0u) << head;
}

TEST_F(EnvTest, TruncationAtMaxTurnsScoresTheLastSolution) {
  config_.max_turns = 2;
  env().reset(task_);
  const StepResult a = env().step(make_action(ActionType::kCompile, "correct"));
  EXPECT_FALSE(a.truncated);
  const StepResult b = env().step(make_action(ActionType::kCompile));
  EXPECT_TRUE(b.truncated);
  EXPECT_FALSE(b.terminated);
  expect_complete_info(b);
  EXPECT_EQ(b.info.truncation_reason, "max_turns");
  ASSERT_TRUE(b.info.final_evaluation.has_value());
  EXPECT_TRUE(b.info.final_evaluation->auto_submitted);
  EXPECT_EQ(outcome_name(b.info.final_evaluation->measurement.outcome), "correct");
  // Scored as a submission, never as a failure. A speed tier needs usable
  // timing, which a loaded CI machine does not always give (seen in a full
  // `./run test` on two cores): the tiered term then pays 0 (docs/rewards.md)
  // and only the turn cost remains; with a usable speedup the reward is positive.
  const json parts = b.info.reward_components.to_json();
  EXPECT_GE(parts.value("tiered", -1.0), 0.0) << parts.dump();
  const Measurement& m = b.info.final_evaluation->measurement;
  if (m.timed && m.speedup_eager.value_or(0.0) > 0) {
    EXPECT_GT(b.reward, 0.0) << b.observation.text;
  }
  EXPECT_TRUE(has(b.observation.text, "evaluated as your submission")) << b.observation.text;
  EXPECT_THROW(env().step(make_action(ActionType::kCompile)), InputError);
}

TEST_F(EnvTest, TruncationWithoutAutoSubmitCountsAsFailure) {
  config_.max_turns = 1;
  config_.reward.on_truncation = TruncationReward::kFail;
  env().reset(task_);
  const StepResult r = env().step(make_action(ActionType::kVerify, "correct"));
  EXPECT_TRUE(r.truncated);
  expect_complete_info(r);
  ASSERT_TRUE(r.info.final_evaluation.has_value());
  EXPECT_FALSE(r.info.final_evaluation->auto_submitted);
  EXPECT_LT(r.reward, 0.0);
  EXPECT_TRUE(has(r.observation.text, "counts as failed")) << r.observation.text;
}

TEST_F(EnvTest, TimeBudgetTruncates) {
  config_.time_budget_s = 0.0001;  // any evaluation uses more
  env().reset(task_);
  const StepResult r = env().step(make_action(ActionType::kVerify, "correct"));
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.info.truncation_reason, "time_budget");
  EXPECT_GT(r.info.budget.time_used_s, 0.0001);
}

TEST_F(EnvTest, EveryStepPaysItsFullRewardWhenConfigured) {
  config_.reward.paid_on = RewardPaidOn::kEveryStep;
  env().reset(task_);
  // A wrong candidate, so the value does not depend on how noisy this machine's
  // timing is: the failure value is paid now, not deferred to the final step.
  const StepResult r = env().step(make_action(ActionType::kProfile, "wrong"));
  EXPECT_FALSE(r.terminated);
  EXPECT_LT(r.reward, -0.5);
  ASSERT_TRUE(r.info.step_reward.has_value());
  EXPECT_EQ(r.info.reward_components.to_json(), r.info.step_reward->to_json());
}

TEST_F(EnvTest, AnalysisToolsFromTheRegistryAreOfferedAndRun) {
  register_source_stats();
  const ResetResult reset = env().reset(task_);
  EXPECT_TRUE(has(reset.observation.text, "`source_stats`")) << "offered in the prompt";
  bool offered = false;
  for (const auto& t : reset.observation.data["tools"]) offered |= t["function"]["name"] == "source_stats";
  EXPECT_TRUE(offered);

  env().step(make_action(ActionType::kCompile, "correct"));
  const StepResult r = env().step_tool_call({{"name", "source_stats"}, {"arguments", {{"verbose", true}}}});
  expect_complete_info(r);
  EXPECT_EQ(r.info.action, "analyze");
  EXPECT_TRUE(has(r.observation.text, "source_stats: 19 lines")) << r.observation.text;
  EXPECT_TRUE(has(r.observation.text, "keep kf_forward short")) << r.observation.text;
  EXPECT_GT(r.observation.data["analysis"]["result"]["facts"]["artifact_bytes"].get<int64_t>(), 0);

  // Bad arguments come back from the registry as an observation.
  const StepResult bad = env().step_tool_call({{"name", "source_stats"}, {"arguments", {{"verbose", 3}}}});
  EXPECT_TRUE(has(bad.observation.text, "bad arguments")) << bad.observation.text;
}

TEST_F(EnvTest, SystemFailureIsNotTheCandidatesFault) {
  // No judge where the executor is told to look: every evaluation fails for
  // reasons of the system, which must not cost the policy a turn or reward.
  config_.tools_dir = std::filesystem::path(KFORGE_BINARY_DIR) / "tests/gym/empty-tools-dir";
  std::filesystem::create_directories(config_.tools_dir);
  env().reset(task_);
  const StepResult r = env().step(make_action(ActionType::kSubmit, "correct"));
  expect_complete_info(r);
  EXPECT_EQ(testing::error_kind(r.info), "system") << r.observation.text;
  EXPECT_FALSE(r.terminated);
  EXPECT_FALSE(r.info.counted_turn);
  EXPECT_EQ(r.info.budget.turns_used, 0);
  EXPECT_DOUBLE_EQ(r.reward, 0.0);
  EXPECT_TRUE(has(r.observation.text, "not your fault")) << r.observation.text;
}

// The auto-submit of a truncated episode goes through the same compile and
// evaluate phases as a submit action, so a judge that cannot run is the
// system's failure there too: the episode ends, unscored.
TEST_F(EnvTest, AnAutoSubmitTheSystemCannotEvaluateIsNotScored) {
  config_.tools_dir = std::filesystem::path(KFORGE_BINARY_DIR) / "tests/gym/empty-tools-dir";
  std::filesystem::create_directories(config_.tools_dir);
  config_.max_turns = 1;
  env().reset(task_);
  const StepResult r = env().step(make_action(ActionType::kCompile, "correct"));
  expect_complete_info(r);
  EXPECT_TRUE(r.truncated);
  const StepInfo& info = r.info;
  EXPECT_FALSE(info.error.has_value()) << "the compile itself worked";
  ASSERT_TRUE(info.final_evaluation.has_value());
  EXPECT_TRUE(info.final_evaluation->auto_submitted);
  ASSERT_TRUE(info.final_evaluation->system_error.has_value()) << to_json(r.info).dump(2);
  EXPECT_TRUE(info.final_evaluation->eval_ms.has_value());
  EXPECT_DOUBLE_EQ(r.reward, 0.0);
  EXPECT_TRUE(has(r.observation.text, "not your fault")) << r.observation.text;
}

TEST_F(EnvTest, ResetStartsAFreshEpisode) {
  env().reset(task_);
  env().step(make_action(ActionType::kSubmit, "correct"));
  const ResetResult again = env().reset(task_, 1);
  EXPECT_EQ(again.info.episode, 2u);
  // The new episode has no solution yet.
  const StepResult r = env().step(make_action(ActionType::kVerify));
  EXPECT_EQ(testing::error_kind(r.info), "no_solution");
  EXPECT_EQ(r.info.turn, 0);
}

}  // namespace
}  // namespace kforge::env
