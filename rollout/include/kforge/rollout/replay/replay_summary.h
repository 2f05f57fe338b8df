// What a set of recorded episodes says, per task and per policy version:
// episodes, turns used, success rate, reward and speedup distributions,
// failure causes, and how each task's best solution improved over turns.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/rollout/replay/recorded_episode.h"

namespace kforge::rollout::replay {

struct Distribution {
  size_t n = 0;
  double mean = 0.0;
  double min = 0.0;
  double p10 = 0.0;
  double median = 0.0;
  double p90 = 0.0;
  double max = 0.0;
};
// Percentiles by linear interpolation between order statistics.
Distribution distribution(std::vector<double> values);

struct GroupSummary {
  std::string key;  // the task id or policy version ("(untagged)" when none)
  size_t episodes = 0;
  size_t successes = 0;  // final verdict correct, no violation
  Distribution turns_used;
  Distribution reward;                           // episode return (total_reward)
  Distribution speedup;                          // final speedup vs eager of the successful, timed episodes
  std::map<std::string, size_t> failure_causes;  // RecordedEpisode::failure_cause -> count

  double success_rate() const { return episodes == 0 ? 0.0 : static_cast<double>(successes) / episodes; }
};

// One task at one turn index, over its episodes; an episode that ended
// earlier keeps its final state.
struct TurnProgress {
  int turn = 0;
  double solved_fraction = 0.0;             // episodes with a correct solution by this turn
  std::optional<double> mean_best_speedup;  // over those, their best timed speedup so far
};

struct ReplaySummary {
  GroupSummary overall;
  std::vector<GroupSummary> by_task;                          // sorted by task id
  std::vector<GroupSummary> by_policy_version;                // sorted by version
  std::map<std::string, std::vector<TurnProgress>> progress;  // task id -> turn 0..max
};

ReplaySummary summarize(const std::vector<RecordedEpisode>& episodes);

json to_json(const Distribution& d);
json to_json(const GroupSummary& g);
json to_json(const ReplaySummary& s);

// Fixed-width text tables for a terminal.
std::string format_summary(const ReplaySummary& s);

// "1.23" with 3 significant digits (2 decimals below 10); "-" for none.
std::string format_number(std::optional<double> v);

}  // namespace kforge::rollout::replay
