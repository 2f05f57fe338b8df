// A recorded episode: what the trainer receives and what replay reads.
#pragma once

#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/step.h"

namespace kforge {

// Version 2: each turn's info.env is a StepInfo
// (env/include/kforge/env/step_info.h), read by field with its types checked
// (a value of the wrong type is an error naming the field) where version 1's
// was free-form JSON. The written shape is version 1's, so version-1 files
// read through the same code (tests/rollout/replay/data/schema_v1/).
// Version 3: a timed measurement carries its speedup's confidence interval
// (measurement speedup_eager_lo, speedup_eager_hi, speedup_confidence; the
// eval report's timing.speedup_interval). Added keys only: version 1 and 2
// files read as before, their measurements without an interval
// (tests/rollout/replay/data/schema_v2/).
inline constexpr int kTrajectorySchemaVersion = 3;
inline constexpr int kOldestReadableTrajectorySchemaVersion = 1;

struct Turn {
  json messages = json::array();  // chat messages the policy saw/produced this turn
  json action = nullptr;          // the parsed action
  Observation observation;
  double reward = 0.0;
  json reward_components = json::object();
  json timings = json::object();  // phase -> milliseconds
  // The rest of what the turn established, for replay and forking (schema:
  // docs/rollout.md): the environment's step info under "env", the policy's
  // reply metadata (version, finish reason, token ids, logprobs) under
  // "policy", the episode's state after the turn under "state". JSON here
  // because core cannot name env::StepInfo; the typed view is
  // rollout::TurnInfo (rollout/include/kforge/rollout/trajectory_info.h).
  json info = json::object();
};

struct Trajectory {
  int schema_version = kTrajectorySchemaVersion;
  std::string id;
  std::string group_id;
  std::string task_id;
  std::vector<Turn> turns;
  std::string policy_version_start;
  std::string policy_version_end;
  double total_reward = 0.0;
  bool terminated = false;
  bool truncated = false;
  json info = json::object();  // typed view: rollout::TrajectoryInfo (trajectory_info.h)
};

json to_json(const Turn& turn);
json to_json(const Trajectory& t);
Trajectory parse_trajectory(const Document& doc);

}  // namespace kforge
