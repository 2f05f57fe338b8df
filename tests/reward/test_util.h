// Builders shared by the reward tests: measurements in the shapes the env
// produces, and one-term reward functions from inline YAML.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "kforge/reward/reward.h"

namespace kforge::reward::testing {

// A verified, timed step (a profile action) with the given speedups.
Measurement timed_correct(double speedup_eager, std::optional<double> speedup_compile = std::nullopt);
// A verify/profile/submit step that ended in `outcome`.
Measurement failed(Outcome outcome);
// `m` with one more violation of `check`.
Measurement with_violation(Measurement m, const std::string& check);

// A reward function from YAML text, with "test.yaml" as its source.
RewardFunction from_yaml(const std::string& text);
// The total of a config holding the single term `term_flow` (a YAML flow
// mapping such as "{type: tiered, margin: 0.1}").
double term_value(const std::string& term_flow, const Measurement& m, const RewardContext& ctx = {});
// The InputError message of `fn`, or "" if it did not throw one.
std::string input_error_of(const std::function<void()>& fn);

}  // namespace kforge::reward::testing
