// What a runner failure is called in the report (judge/verdict.h).
#include "judge/verdict.h"

#include <gtest/gtest.h>

#include <string>

namespace kforge::judge {
namespace {

judge::RunnerReply timed_out_after(double ms) {
  judge::RunnerReply r;
  r.status = judge::RunnerReply::Status::kTimedOut;
  r.round_trip_ms = ms;
  return r;
}

TEST(RunnerFailureVerdict, ACallThatUsedItsLimitTimedOutOnItsOwn) {
  Verdict v = verdict_from_runner_failure(timed_out_after(3001), "in kf_forward (seed 0)", 3000, "");
  EXPECT_EQ(v.outcome, Outcome::kTimeout);
  EXPECT_EQ(v.summary, "timed out: no reply within 3000 ms in kf_forward (seed 0)");
}

TEST(RunnerFailureVerdict, ACallCutShortSaysTheEvaluationBudgetRanOut) {
  // The overall deadline (which also paid for the judge's work) expired 1.2 s
  // into a call allowed 10 s: the report must not say the call took 10 s.
  Verdict v = verdict_from_runner_failure(timed_out_after(1200), "in kf_forward (seed 3)", 10000, "");
  EXPECT_EQ(v.outcome, Outcome::kTimeout);
  EXPECT_EQ(v.summary.find("no reply within 10000 ms"), std::string::npos) << v.summary;
  EXPECT_NE(v.summary.find("eval_timeout_ms"), std::string::npos) << v.summary;
  EXPECT_NE(v.summary.find("1200 ms of its own 10000 ms"), std::string::npos) << v.summary;
}

}  // namespace
}  // namespace kforge::judge
