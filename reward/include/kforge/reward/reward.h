// Rewards (docs/architecture.md#rewards): functions of one step's Measurement, composed from
// named terms by a YAML config (configs/rewards/*.yaml).
//
// Invariant, enforced here and not by configs: a step that is not correct, or
// that has any violation, earns no speed reward from any term.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/measurement.h"
#include "kforge/reward/term.h"

namespace kforge::reward {

// What a reward may need beyond the measurement itself.
struct RewardContext {
  // Contrastive rewards: measured speedups (vs eager) of the earlier solutions
  // of this task that the prompt showed as exemplars.
  std::vector<double> exemplar_speedups;
};

struct RewardBreakdown {
  double total = 0.0;
  // Every term by name, in config order, e.g. {"tiered", 2.0}, {"turn_cost", -0.01}.
  // Values are weighted contributions, so `total` is their sum.
  std::vector<std::pair<std::string, double>> components;
  json to_json() const;  // {"total": ..., "<term>": value, ...}
};

// The configs directory: $KFORGE_CONFIG_DIR when set (and then only it), else
// the source tree's configs/ compiled in at build time. Presets live in its
// rewards/ subdirectory. Throws InputError if the directory does not exist.
std::filesystem::path config_dir();
// configs/rewards/<name>.yaml; InputError listing the presets (with a
// did-you-mean) when there is no such preset.
std::filesystem::path preset_path(const std::string& name);
// Names of the preset files in configs/rewards, sorted.
std::vector<std::string> preset_names();

// One rollout of a GRPO group, for normalize_group: its total reward and the
// speed evidence of the measurement its episode was scored on (the submit,
// or a truncated episode's final evaluation), when that passed and was timed
// with an interval.
struct GroupMember {
  double total = 0.0;
  std::optional<SpeedEvidence> speed;
};

class RewardFunction {
 public:
  // From a config document; errors name the file, field and line.
  static RewardFunction from_document(const Document& doc);
  static RewardFunction from_file(const std::filesystem::path& path);
  // A preset by name ("default", "tiered", "log_speedup", "linear_capped",
  // "contrastive": configs/rewards/<name>.yaml, see config_dir()) or a path to
  // a YAML/JSON file (anything with a '/' or a .yaml/.yml/.json extension).
  static RewardFunction load(const std::string& name_or_path);

  RewardBreakdown compute(const Measurement& m, const RewardContext& ctx = {}) const;
  // Group-relative normalization over the n rollouts of one task (GRPO):
  // returns the totals normalized as the config says (identity when off).
  std::vector<double> normalize_group(const std::vector<double>& totals) const;
  // The same with each member's speed evidence. With group_normalization's
  // `ties: statistical`, members whose speedups are statistically
  // indistinguishable first get their tie class's mean total (classes are
  // formed best first; a member joins when it is tied with the class's
  // pooled estimate, docs/rewards.md); with `ties: exact` (the default) the
  // evidence is ignored and this is normalize_group(totals).
  std::vector<double> normalize_group(const std::vector<GroupMember>& members) const;
  // The totals after tie pooling alone (`ties: statistical`), before any
  // normalization; the totals unchanged with `ties: exact`.
  std::vector<double> pool_ties(const std::vector<GroupMember>& members) const;
  // What the terms need of the timing (TimingNeed): their edges and the
  // tightest log resolution.
  TimingNeed timing_need() const;

  const std::string& name() const;
  json describe() const;  // the resolved config, for logs and trajectories
  // Where the config came from: a file path, or the Document's source label.
  const std::string& source() const;
  // The component names, in config order (the keys of compute()'s breakdown).
  std::vector<std::string> component_names() const;

  RewardFunction(RewardFunction&&) noexcept;
  RewardFunction& operator=(RewardFunction&&) noexcept;
  ~RewardFunction();

 private:
  struct Impl;
  explicit RewardFunction(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kforge::reward
