// The typed trajectory infos (rollout/trajectory_info.h) against recorded
// files: the worker-written ones of earlier builds read and write back byte
// for byte, every readable file reads, and a value of the wrong type is an
// error naming its field. trainer_bridge/python/tests/test_step_info.py reads
// the same files with the Python StepInfo.
#include "kforge/rollout/trajectory_info.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kforge/core/error.h"
#include "kforge/core/jsonl.h"
#include "kforge/core/trajectory.h"

namespace kforge::rollout {
namespace {

namespace fs = std::filesystem;

fs::path recorded(const std::string& name) { return fs::path(KFORGE_SOURCE_DIR) / "tests/rollout/replay/data" / name; }

// Every line of a JSONL file as a trajectory.
std::vector<Trajectory> trajectories(const fs::path& file) {
  std::vector<Trajectory> out;
  for_each_jsonl_line(file, [&](const Document& line, size_t) { out.push_back(parse_trajectory(line)); });
  return out;
}

// Files the rollout workers wrote (schema versions 1 and 3 of earlier builds).
const std::vector<std::string> kWorkerWritten = {"schema_v1/rollout-turn-budget.jsonl",
                                                 "baseline_policy/rollout-baseline-policy.jsonl"};
// Files written by the replay tests' recorder (only some keys of the infos).
const std::vector<std::string> kRecorderWritten = {"schema_v1/replay-episodes.jsonl",
                                                   "schema_v2/replay-episodes.jsonl"};

TEST(TrajectoryInfoTest, WorkerWrittenFilesReadAndWriteBackByteForByte) {
  size_t turns = 0;
  for (const std::string& name : kWorkerWritten) {
    const std::vector<Trajectory> all = trajectories(recorded(name));
    ASSERT_FALSE(all.empty()) << name;
    for (const Trajectory& t : all) {
      const TrajectoryInfo info = trajectory_info_from_json(t.info, name);
      EXPECT_EQ(to_json(info).dump(), t.info.dump()) << name << " " << t.id;
      EXPECT_EQ(info.task_spec(name).id, t.task_id);
      ASSERT_TRUE(info.seed.has_value());
      ASSERT_TRUE(info.group.has_value());
      EXPECT_EQ(info.group->id, t.group_id);
      for (size_t i = 0; i < t.turns.size(); ++i) {
        const TurnInfo ti = turn_info_from_json(t.turns[i].info, name);
        EXPECT_EQ(to_json(ti).dump(), t.turns[i].info.dump()) << name << " " << t.id << " turn " << i;
        ASSERT_TRUE(ti.env && ti.state && ti.policy);
        EXPECT_EQ(ti.env->turn, static_cast<int>(i));
        EXPECT_EQ(ti.state->turns_used, ti.env->budget.turns_used);
        EXPECT_DOUBLE_EQ(ti.env->reward_components.total, t.turns[i].reward);
        ++turns;
      }
      // The last turn ends the episode, as the trajectory says.
      EXPECT_TRUE(turn_info_from_json(t.turns.back().info, name).env->final) << t.id;
    }
  }
  EXPECT_GT(turns, 2u);
}

TEST(TrajectoryInfoTest, RecorderWrittenFilesReadWithWhatTheyHave) {
  size_t with_env = 0, step_infos = 0;
  for (const std::string& name : kRecorderWritten) {
    const std::vector<Trajectory> all = trajectories(recorded(name));
    ASSERT_FALSE(all.empty()) << name;
    for (const Trajectory& t : all) {
      const TrajectoryInfo info = trajectory_info_from_json(t.info, name);
      if (info.env) {
        EXPECT_EQ(info.env->backend, "cpu");
        ++with_env;
      }
      EXPECT_FALSE(info.group.has_value()) << "the recorder writes no group";
      for (const Turn& turn : t.turns) {
        const TurnInfo ti = turn_info_from_json(turn.info, name);
        EXPECT_FALSE(ti.state.has_value());
        if (ti.env) {
          EXPECT_EQ(ti.env->task_id, t.task_id);
          ++step_infos;
        }
      }
    }
  }
  EXPECT_GT(with_env, 0u);
  EXPECT_GT(step_infos, 0u);
}

std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TrajectoryInfoTest, WrongTypesAreErrorsNamingTheField) {
  const json state = {{"turns_used", 1}, {"time_used_s", 0.5}, {"compile_errors", 0}, {"episode_return", 0.1}};
  EXPECT_EQ(error_of([&] { turn_info_from_json({{"state", state}}, "t"); }), "");
  json bad = {{"state", state}};
  bad["state"]["turns_used"] = "one";
  const std::string e = error_of([&] { turn_info_from_json(bad, "trajectory x: turn 2 info"); });
  EXPECT_NE(e.find("trajectory x: turn 2 info"), std::string::npos) << e;
  EXPECT_NE(e.find("/state/turns_used"), std::string::npos) << e;
  json missing = {{"state", state}};
  missing["state"].erase("episode_return");
  EXPECT_NE(error_of([&] { turn_info_from_json(missing, "t"); }).find("episode_return"), std::string::npos);
  EXPECT_NE(error_of([&] {
              turn_info_from_json({{"policy", {{"token_ids", {1, "2"}}}}}, "t");
            }).find("/policy/token_ids/1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              turn_info_from_json({{"env", {{"budget", {{"turns_used", 1.5}}}}}}, "t");
            }).find("/env/budget/turns_used"),
            std::string::npos);
  EXPECT_NE(error_of([&] { trajectory_info_from_json({{"seed", -1}}, "t"); }).find("/seed"), std::string::npos);
  EXPECT_NE(error_of([&] {
              trajectory_info_from_json({{"exemplars", {{{"speedup_eager", "fast"}}}}}, "t");
            }).find("/exemplars/0/speedup_eager"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              trajectory_info_from_json({{"group", {{"advantage", "high"}}}}, "t");
            }).find("/group/advantage"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TrajectoryInfo{}.task_spec("trajectory x"); }).find("info.task is missing"),
            std::string::npos);
}

TEST(TrajectoryInfoTest, WhatTheWorkerFillsWritesAndReadsBack) {
  TurnInfo t;
  t.policy = PolicyTurnInfo{"7",
                            "tool_calls",
                            12.5,
                            std::vector<int64_t>{1, 2, 3},
                            std::vector<double>{-0.5, std::nan("")},
                            json{{"prompt_tokens", 10}}};
  t.state = TurnState{2, 1.25, 1, 0.5, 0};
  env::StepInfo step;
  step.turn = 1;
  step.action = "verify";
  step.budget.turns_used = 2;
  t.env = step;
  // Through text, as a file carries it: the NaN logprob is written null and
  // reads back NaN.
  const json written = json::parse(to_json(t).dump());
  EXPECT_TRUE(written["policy"]["logprobs"][1].is_null());
  const TurnInfo back = turn_info_from_json(written, "t");
  ASSERT_TRUE(back.policy && back.state && back.env);
  EXPECT_EQ(back.policy->token_ids, t.policy->token_ids);
  ASSERT_EQ(back.policy->logprobs->size(), 2u);
  EXPECT_TRUE(std::isnan((*back.policy->logprobs)[1]));
  EXPECT_EQ(back.state->solution_turn, 0);
  EXPECT_EQ(back.env->action, "verify");
  EXPECT_EQ(to_json(back).dump(), written.dump());
  // An empty turn info (writers that kept none) is no part at all.
  const TurnInfo none = turn_info_from_json(json::object(), "t");
  EXPECT_FALSE(none.env || none.policy || none.state);
  EXPECT_EQ(to_json(none), json::object());

  TrajectoryInfo info;
  info.run_id = "r";
  info.seed = 11;
  info.group = GroupInfo{"r-g0", 2, 1, json::array({1.0, nullptr}), std::nullopt, "mean", 1};
  info.fork = ForkInfo{"p", "pg", 3};
  const json j = to_json(info);
  EXPECT_TRUE(j["group"]["advantage"].is_null()) << "members left out of the normalization have none";
  const TrajectoryInfo again = trajectory_info_from_json(j, "t");
  EXPECT_FALSE(again.group->advantage.has_value());
  EXPECT_EQ(again.fork->turn, 3);
  EXPECT_EQ(to_json(again), j);
}

}  // namespace
}  // namespace kforge::rollout
