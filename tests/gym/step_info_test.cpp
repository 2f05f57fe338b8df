// StepInfo's JSON form: what to_json writes reads back equal, recorded infos
// of older writers read with defaults, and a value of the wrong type is an
// error naming its field. (env_test checks the round trip on real steps.)
#include "kforge/env/step_info.h"

#include <gtest/gtest.h>

#include "kforge/env/step_result.h"

namespace kforge::env {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

StepInfo truncated_step() {
  StepInfo s;
  s.env_id = 3;
  s.episode = 7;
  s.task_id = "test/affine";
  s.seed = 18446744073709551615ull;  // seeds are unsigned 64-bit
  s.turn = 1;
  s.action = "verify";
  s.counted_turn = true;
  s.final = true;
  s.reward_components.total = -0.01;
  s.reward_components.components = {{"turn_cost", -0.01}};
  s.step_reward = reward::RewardBreakdown{-1.01, {{"tiered", -1.0}, {"turn_cost", -0.01}}};
  s.measurement.action = "verify";
  s.measurement.compiled = true;
  s.measurement.outcome = Outcome::kWrong;
  s.measurement.turn = 1;
  s.timings.step_ms = 12.5;
  s.timings.eval_phases = {{"verify", 3.0}};
  s.cache_hit = true;
  s.solution_hash = "abc123";
  s.episode_return = -0.02;
  s.budget = {2, 2, 0.25, 600.0, 0};
  s.tool_call = {{"name", "verify"}, {"arguments", "{}"}};
  FinalEvaluation fe;
  fe.auto_submitted = true;
  fe.measurement.action = "submit";
  fe.eval_ms = 40.0;
  fe.system_error = "the judge could not evaluate the solution";
  s.final_evaluation = fe;
  s.truncation_reason = "max_turns";
  return s;
}

TEST(StepInfoTest, WhatToJsonWritesReadsBackEqual) {
  const StepInfo s = truncated_step();
  const json j = to_json(s);
  EXPECT_EQ(j["seed"].get<uint64_t>(), s.seed);
  EXPECT_EQ(j["error"], nullptr);
  EXPECT_EQ(j["final_evaluation"]["system_error"], "the judge could not evaluate the solution");
  EXPECT_FALSE(j.contains("eval_report")) << "absent when the judge did not run";
  EXPECT_FALSE(j.contains("tool_call_preview"));
  const StepInfo back = step_info_from_json(j);
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.seed, s.seed);
  EXPECT_EQ(back.budget.max_turns, 2);
  ASSERT_TRUE(back.step_reward.has_value());
  EXPECT_DOUBLE_EQ(back.step_reward->total, -1.01);
  ASSERT_TRUE(back.final_evaluation.has_value());
  EXPECT_EQ(back.scored_measurement().action, "submit") << "a truncated episode is scored on its final evaluation";
  EXPECT_FALSE(back.system_error()) << "the step itself had no error";
}

TEST(StepInfoTest, AStepThatWasNotATurnHasNoStepRewardAndItsError) {
  StepInfo s;
  s.error = StepError{StepErrorKind::kEpisodeFinished, "it ended with a submit"};
  const json j = to_json(s);
  EXPECT_EQ(j["step_reward"], json::object());
  EXPECT_EQ(j["error"]["kind"], "episode_finished");
  EXPECT_FALSE(j.contains("truncation_reason"));
  const StepInfo back = step_info_from_json(j);
  EXPECT_FALSE(back.step_reward.has_value());
  ASSERT_TRUE(back.error.has_value());
  EXPECT_EQ(back.error->kind, StepErrorKind::kEpisodeFinished);
  EXPECT_EQ(back.scored_measurement().outcome, Outcome::kNotRun);
}

TEST(StepInfoTest, MissingKeysReadAsDefaultsAndUnknownKeysAreIgnored) {
  const StepInfo s = step_info_from_json({{"env_id", 1}, {"a_key_of_a_later_build", {1, 2}}});
  EXPECT_EQ(s.env_id, 1);
  EXPECT_EQ(s.turn, 0);
  EXPECT_FALSE(s.error.has_value());
  EXPECT_TRUE(s.tool_call.is_null());
}

TEST(StepInfoTest, AValueOfTheWrongTypeIsAnErrorNamingItsField) {
  auto error_of = [](const json& j) {
    try {
      step_info_from_json(j, "<recorded turn>");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_TRUE(has(error_of({{"turn", "two"}}), "<recorded turn>: field /turn: expected"))
      << error_of({{"turn", "two"}});
  EXPECT_TRUE(has(error_of({{"seed", -1}}), "field /seed: expected a non-negative integer"));
  EXPECT_TRUE(has(error_of({{"budget", {{"max_turns", true}}}}), "field /budget/max_turns"));
  EXPECT_TRUE(has(error_of({{"error", {{"kind", "meltdown"}}}}), "field /error/kind"));
  EXPECT_TRUE(has(error_of({{"reward_components", {{"total", "a lot"}}}}), "field /reward_components/total"));
  EXPECT_TRUE(has(error_of({{"measurement", {{"turn", "x"}}}}), "field /measurement: not a measurement"));
  EXPECT_TRUE(has(error_of({{"final_evaluation", 3}}), "field /final_evaluation: expected an object"));
  EXPECT_TRUE(has(error_of(json::array()), "expected an object"));
}

}  // namespace
}  // namespace kforge::env

namespace kforge::env {
namespace {

// The one verdict rule that kforge eval's report and eval-batch rows both
// show (step_verdict): an error names its kind whatever was measured, and a
// truncated episode is judged on its final evaluation, not its last step.
// The server's reply to a step is to_json(StepResult): the shape it had when
// the info was JSON (trainer_bridge/PROTOCOL.md), the info its JSON form, and a
// reader of the reply gets the struct back.
TEST(StepResultTest, TheWireShapeIsTheResultWithItsInfosJsonForm) {
  StepResult r;
  r.observation.text = "Correct.";
  r.observation.data = {{"type", "step"}};
  r.reward = 1.5;
  r.truncated = true;
  r.info = truncated_step();
  const json wire = to_json(r);
  EXPECT_EQ(wire, json({{"observation", {{"text", "Correct."}, {"data", {{"type", "step"}}}}},
                        {"reward", 1.5},
                        {"terminated", false},
                        {"truncated", true},
                        {"info", to_json(r.info)}}));
  const StepInfo back = step_info_from_json(json::parse(wire.dump())["info"]);
  EXPECT_EQ(to_json(back), to_json(r.info));
  EXPECT_EQ(back.seed, 18446744073709551615ull);
}

TEST(ResetInfoTest, TheWireShapeHasEveryKeyAndResumedOnlyAfterAResume) {
  ResetInfo info;
  info.env_id = 2;
  info.episode = 5;
  info.task_id = "test/affine";
  info.seed = 9;
  info.backend = "cpu";
  info.solution_mode = "cpp";
  info.max_turns = 4;
  info.time_budget_s = 60.0;
  info.tools = json::array({{{"type", "function"}}});
  info.reward_function = "tiered";
  info.reward_source = "configs/rewards/tiered.yaml";
  info.reference_check_status = "ok";
  const json j = to_json(info);
  EXPECT_EQ(j, json({{"env_id", 2},
                     {"episode", 5},
                     {"task_id", "test/affine"},
                     {"seed", 9},
                     {"backend", "cpu"},
                     {"solution_mode", "cpp"},
                     {"budgets", {{"max_turns", 4}, {"time_budget_s", 60.0}}},
                     {"tools", info.tools},
                     {"reward", {{"function", "tiered"}, {"source", "configs/rewards/tiered.yaml"}}},
                     {"reward_components", {{"total", 0.0}}},
                     {"reference_check", {{"status", "ok"}}}}));
  info.resumed = ResumedInfo{2, 1.5, 1, 0.25, true};
  info.reference_check_status = "error";
  info.reference_check_problem = "system error: judge down";
  const json resumed = to_json(info);
  EXPECT_EQ(resumed["resumed"], json({{"turns_used", 2},
                                      {"time_used_s", 1.5},
                                      {"compile_errors", 1},
                                      {"episode_return", 0.25},
                                      {"has_solution", true}}));
  EXPECT_EQ(resumed["reference_check"], json({{"status", "error"}, {"problem", "system error: judge down"}}));
}

TEST(StepVerdictTest, AnErrorFirstThenTheScoredMeasurementsOutcome) {
  StepInfo s;
  s.measurement.outcome = Outcome::kCorrect;
  EXPECT_EQ(step_verdict(s), "correct");
  s.measurement.outcome = Outcome::kWrong;
  EXPECT_EQ(step_verdict(s), "wrong");

  StepInfo truncated = truncated_step();
  truncated.error.reset();
  truncated.measurement.outcome = Outcome::kWrong;
  truncated.final_evaluation->measurement.outcome = Outcome::kCorrect;
  EXPECT_EQ(step_verdict(truncated), "correct") << "the final evaluation is what was scored";

  s.error = StepError{StepErrorKind::kSystem, "the judge crashed"};
  EXPECT_EQ(step_verdict(s), "error: system");
  EXPECT_TRUE(s.system_error());
  s.error->kind = StepErrorKind::kInvalidAction;
  EXPECT_EQ(step_verdict(s), "error: invalid_action");
  EXPECT_FALSE(s.system_error());
}

}  // namespace
}  // namespace kforge::env
