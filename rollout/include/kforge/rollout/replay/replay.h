// Replay (docs/architecture.md#rollouts): what `kforge replay FILE...` does, as a library.
//
//   ReplayOptions options;
//   options.task_sets = {"examples"};
//   options.reevaluate = true;
//   options.env = env::load_env_config("cpu");
//   ReplayAnalysis a = analyze_replay({"runs/trajectories.jsonl"}, options);
//   std::cout << format_replay(a);
//   write_replay_report("replay-report", a);   // replay_report.h
//
// It reads recorded trajectories (recorded_episode.h), summarizes them per
// task and per policy version (replay_summary.h), finds the optimization
// techniques of each episode's final solution (techniques.h) and, when asked,
// re-runs every recorded submit on this machine (reevaluation.h).
// docs/replay.md is the user's guide.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/env/env_config.h"
#include "kforge/rollout/replay/recorded_episode.h"
#include "kforge/rollout/replay/reevaluation.h"
#include "kforge/rollout/replay/replay_summary.h"
#include "kforge/rollout/replay/techniques.h"

namespace kforge::rollout::replay {

struct ReplayOptions {
  // Task sets (core/task_set.h: .jsonl, a task file or a directory) that
  // re-evaluation and the fusion verdict look tasks up in; a trajectory that
  // carries its task (info.task) needs none.
  std::vector<std::filesystem::path> task_sets;
  bool techniques = true;
  TechniqueOptions technique;
  // SASS is read for at most this many distinct CUDA solutions (nvcc takes
  // seconds each); the rest get source evidence only.
  size_t max_sass_solutions = 64;
  bool reevaluate = false;
  ReevalOptions reeval;
  std::optional<env::EnvConfig> env;  // required when reevaluate
  // Progress lines for a terminal (stderr); may be empty.
  std::function<void(const std::string&)> log;
};

// The techniques of one episode's final solution.
struct SolutionTechniques {
  std::string trajectory_id;
  std::string task_id;
  int turn = -1;
  std::string mode;
  bool success = false;
  std::optional<double> speedup;
  TechniqueReport report;
};

// One technique over all analyzed solutions.
struct TechniqueStat {
  std::string name;
  size_t solutions = 0;
  size_t successes = 0;
  Distribution speedup;  // of the successful, timed ones
};

struct ReplayAnalysis {
  RecordedSet recorded;
  ReplaySummary summary;
  std::vector<SolutionTechniques> techniques;
  std::vector<TechniqueStat> technique_stats;  // technique_names() order, used ones only
  std::optional<ReevalReport> reevaluation;
  std::vector<std::string> notes;  // things the reader should know (tasks not found, ...)
};

// InputError for options that cannot work (a task set that does not load,
// reevaluate without an env config); problems in trajectory files are
// reported in `recorded.problems`, not thrown.
ReplayAnalysis analyze_replay(const std::vector<std::filesystem::path>& files, const ReplayOptions& options);

// {"files", "lines", "problems", "episodes": [...], "summary", "techniques",
//  "technique_stats", "reevaluation", "notes"}: the report's data.
json to_json(const ReplayAnalysis& analysis);
std::string format_replay(const ReplayAnalysis& analysis);

}  // namespace kforge::rollout::replay
