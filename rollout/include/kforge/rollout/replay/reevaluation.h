// Re-evaluation of recorded submits on this machine: does the reward
// reproduce, and within what spread?
//
// Each recorded submit (a turn whose action is "submit") is run again through
// the environment, `repeats` times: a fresh episode of the same task with the
// recorded reset seed (so the same verification inputs), the recorded
// solution submitted. The fresh measurement is scored by the env config's
// reward function at the recorded turn and with the recorded exemplar
// speedups, so position-dependent terms (a linear turn cost) and contrastive
// terms are paid as they were; only what the solution does is measured anew.
//
// Verdicts (ReevalVerdict): exact (every run paid the recorded reward),
// within_spread (same outcome; the recorded reward lies within the runs'
// range widened by the tolerance), differs (same outcome, reward outside it:
// timing moved across a reward boundary), outcome_differs (e.g. recorded
// correct, now wrong: nondeterminism, or a different machine), and
// not_reevaluated (why: the task is unknown, the solution's mode needs
// another backend, the environment failed).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/env_config.h"
#include "kforge/rollout/replay/recorded_episode.h"

namespace kforge::rollout::replay {

struct ReevalOptions {
  int repeats = 3;  // runs per submit
  // A recorded reward counts as reproduced when it lies within the runs'
  // [min, max] widened by max(abs_tolerance, rel_tolerance * |recorded|).
  double abs_tolerance = 0.01;
  double rel_tolerance = 0.05;
  size_t max_submits = 0;  // 0: all of them
  int parallel = 4;        // episodes in flight at once (EnvPool slots)
};

enum class ReevalVerdict { kExact, kWithinSpread, kDiffers, kOutcomeDiffers, kNotReevaluated };
const std::string& reeval_verdict_name(ReevalVerdict v);

struct ReevalRow {
  std::string trajectory_id;
  std::string task_id;
  std::string file;
  size_t line = 0;
  int turn = 0;  // index of the submit in the trajectory
  uint64_t seed = 0;
  std::string recorded_outcome;
  std::optional<double> recorded_speedup;
  double recorded_reward = 0.0;
  std::vector<std::string> outcomes;  // one per run
  std::vector<std::optional<double>> speedups;
  std::vector<double> rewards;
  ReevalVerdict verdict = ReevalVerdict::kNotReevaluated;
  std::string note;  // why not re-evaluated, or what differed

  double spread() const;  // max - min of the runs' rewards (0 with < 2 runs)
};

struct ReevalReport {
  std::vector<ReevalRow> rows;
  std::map<std::string, size_t> verdicts;  // verdict name -> count
  size_t runs = 0;                         // environment episodes run
  std::string backend;
};

// Task specs by id for the trajectories: from --tasks, and from trajectories
// that carry their task.
using TaskLookup = std::function<const TaskSpec*(const RecordedEpisode&)>;

// Runs every recorded submit of `episodes` (up to options.max_submits) through
// an EnvPool built from `config`. `progress`, when set, is called after each
// finished run with (done, total). Throws SystemError only when the
// environment cannot start at all.
ReevalReport reevaluate(const std::vector<RecordedEpisode>& episodes, const TaskLookup& tasks,
                        const env::EnvConfig& config, const ReevalOptions& options,
                        const std::function<void(size_t, size_t)>& progress = {});

json to_json(const ReevalRow& row);
json to_json(const ReevalReport& report);
std::string format_reevaluation(const ReevalReport& report);

}  // namespace kforge::rollout::replay
