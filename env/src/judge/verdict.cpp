#include "judge/verdict.h"

#include <cmath>

namespace kforge::judge {
namespace {

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f ms", std::round(ms));
  return buf;
}

constexpr const char* kOutOfMemory = " (out of memory: the allocation limit was reached)";
// A timed-out exchange that ran less than this share of its call limit was
// stopped by the evaluation's overall deadline instead.
constexpr double kBudgetCutFraction = 0.95;

bool mentions_out_of_memory(const std::string& output) {
  return output.find("bad_alloc") != std::string::npos || output.find("Cannot allocate memory") != std::string::npos ||
         output.find("out of memory") != std::string::npos;
}

}  // namespace

Verdict Verdict::violation(const std::string& check, const std::string& detail) {
  Verdict v;
  v.outcome = Outcome::kViolation;
  v.summary = "violation " + check + ": " + detail;
  v.violations.push_back({check, detail});
  return v;
}

Verdict verdict_from_runner_failure(const RunnerReply& reply, const std::string& where, double limit_ms,
                                    const std::string& output) {
  using Status = RunnerReply::Status;
  Verdict v;
  switch (reply.status) {
    case Status::kOk:
      return v;
    case Status::kCrashed:
      v.outcome = Outcome::kCrash;
      v.summary = "crashed: " + reply.detail + " " + where;
      if (mentions_out_of_memory(output)) v.summary += kOutOfMemory;
      return v;
    case Status::kTimedOut:
      v.outcome = Outcome::kTimeout;
      // A call cut short well before its own limit ran into the evaluation's
      // overall budget, which also paid for the judge's own work: say which
      // limit ran out rather than claim the call took its full limit.
      if (reply.round_trip_ms > 0 && reply.round_trip_ms < kBudgetCutFraction * limit_ms) {
        v.summary = "timed out: the evaluation's overall budget (eval_timeout_ms) ran out after this call had run " +
                    format_ms(reply.round_trip_ms) + " of its own " + format_ms(limit_ms) + " " + where;
      } else {
        v.summary = "timed out: no reply within " + format_ms(limit_ms) + " " + where;
      }
      return v;
    case Status::kSandbox:
      v = Verdict::violation("sandbox", reply.detail + " " + where);
      return v;
    case Status::kProtocol:
      v = Verdict::violation("harness_tamper", "the runner's control channel carried an unexpected message (" +
                                                   reply.detail + ") " + where);
      return v;
    case Status::kError:
      v.outcome = Outcome::kRuntimeError;
      v.summary = "runtime error: " + reply.detail + " " + where;
      if (mentions_out_of_memory(reply.detail)) v.summary += kOutOfMemory;
      return v;
  }
  return v;
}

}  // namespace kforge::judge
