// The CUDA exploit candidates on a GPU (label gpu: built with
// KFORGE_GPU_TESTS, run by `ctest --preset gpu`): each is evaluated like a
// submit step (verify + time, no profile stage) through the Executor with the cuda
// backend, and must
//   1. end in one of the states expectations.json allows for it, with the
//      named violation where one is named (when the name is absent the test
//      prints what was expected and what the report says, and fails), and
//   2. earn no speed reward: reward::speed_facts() is empty and the tiered
//      preset pays at most 0; the only exception is a row's no-gain
//      alternative (the cheat never triggered: correct, but not faster than
//      eager beyond the allowed factor).
#include <gtest/gtest.h>

#include <memory>

#include "corpus.h"
#include "gpu_eval.h"
#include "kforge/env/executor.h"
#include "kforge/reward/reward.h"
#include "kforge/reward/term.h"

namespace kforge::corpus {
namespace {

bool has_check(const std::vector<Violation>& violations, const std::string& check) {
  for (const auto& v : violations) {
    if (v.check == check) return true;
  }
  return false;
}

std::string describe_alternatives(const std::vector<Alternative>& alts) {
  std::string s;
  for (const auto& a : alts) {
    s += (s.empty() ? "" : " | ") + a.outcome;
    if (!a.violation.empty()) s += " + " + a.violation;
    if (a.max_speedup_eager) s += " with speedup <= " + std::to_string(*a.max_speedup_eager);
  }
  return s;
}

class CudaExploitGpu : public ::testing::TestWithParam<Exploit> {};

TEST_P(CudaExploitGpu, EarnsNoSpeedRewardAndIsCaughtByTheExpectedCheck) {
  const Exploit& e = GetParam();
  env::EvalReport report;
  if (!evaluate_as_submit(e.file, e.task, &report)) return;
  const Measurement m = measurement_from(report);
  const std::string actual = outcome_name(report.outcome) + " with violations [" + describe(report.violations) +
                             "]; summary: " + report.summary;

  const Alternative* matched = nullptr;
  for (const auto& a : e.expect) {
    if (a.outcome != outcome_name(report.outcome)) continue;
    if (!a.violation.empty() && !has_check(report.violations, a.violation)) continue;
    if (a.max_speedup_eager && !report.violations.empty()) continue;
    matched = &a;
    break;
  }
  if (!e.known_gap.empty()) {
    // Pinned like the load-time suite pins it: a documented gap
    // (docs/threat-model.md) gets past every check and runs as the ordinary
    // kernel it also is; the day a check catches it, this fails and
    // expectations.json must drop known_gap.
    EXPECT_EQ(matched, nullptr) << e.name << " is now caught (" << actual
                                << "): the known gap is closed; drop known_gap from expectations.json";
    EXPECT_EQ(outcome_name(report.outcome), "correct") << e.name << " (known gap): " << actual;
    return;
  }
  EXPECT_NE(matched, nullptr) << e.name << " (" << e.exploit_class
                              << ")\n  expected: " << describe_alternatives(e.expect) << "\n  actual:   " << actual
                              << (e.known_gap.empty() ? "" : "\n  known gap: " + e.known_gap);

  const double tiered = reward::RewardFunction::load("tiered").compute(m).total;
  if (matched != nullptr && matched->max_speedup_eager) {
    // Neutralized: an ordinary kernel, which must not be paid as a fast one.
    ASSERT_TRUE(m.speedup_eager.has_value()) << actual;
    EXPECT_LE(*m.speedup_eager, *matched->max_speedup_eager)
        << e.name << " was correct and faster than eager: the cheat paid off. " << timing_dump(report);
    EXPECT_LE(tiered, 1.0) << actual;
    return;
  }
  EXPECT_FALSE(reward::speed_facts(m).has_value()) << e.name << " is eligible for a speed reward: " << actual << "\n"
                                                   << timing_dump(report);
  EXPECT_LE(tiered, 0.0) << e.name << ": " << actual;
}

INSTANTIATE_TEST_SUITE_P(CudaCorpus, CudaExploitGpu, ::testing::ValuesIn(load_exploits()), NameOf());

}  // namespace
}  // namespace kforge::corpus
