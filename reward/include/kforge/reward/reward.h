// Rewards (DESIGN.md §9): functions of one step's Measurement, composed from
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
  std::vector<std::pair<std::string, double>> components;
  json to_json() const;  // {"total": ..., "<term>": value, ...}
};

class RewardFunction {
 public:
  // From a config document; errors name the file, field and line.
  static RewardFunction from_document(const Document& doc);
  static RewardFunction from_file(const std::filesystem::path& path);
  // A preset by name ("tiered", "log_speedup", "linear_capped", "contrastive")
  // or a path to a YAML file.
  static RewardFunction load(const std::string& name_or_path);

  RewardBreakdown compute(const Measurement& m, const RewardContext& ctx = {}) const;
  // Group-relative normalization over the n rollouts of one task (GRPO):
  // returns the totals normalized as the config says (identity when off).
  std::vector<double> normalize_group(const std::vector<double>& totals) const;

  const std::string& name() const;
  json describe() const;  // the resolved config, for logs and trajectories

  RewardFunction(RewardFunction&&) noexcept;
  RewardFunction& operator=(RewardFunction&&) noexcept;
  ~RewardFunction();

 private:
  struct Impl;
  explicit RewardFunction(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kforge::reward
