// The conclusion of one phase of an evaluation: an outcome, the one-line
// summary a report leads with, and any violations. Also the mapping from a
// runner failure to that conclusion, shared by every phase.
#pragma once

#include <string>
#include <vector>

#include "judge/runner_process.h"
#include "kforge/core/measurement.h"

namespace kforge::judge {

struct Verdict {
  Outcome outcome = Outcome::kCorrect;
  std::string summary;
  std::vector<Violation> violations;
  bool failed() const { return outcome != Outcome::kCorrect; }

  static Verdict violation(const std::string& check, const std::string& detail);
};

// `where` says what was running, e.g. "in kf_forward (seed 0, base shape)";
// `limit_ms` is the deadline that applied; `output` the candidate's output
// tail (to recognise out-of-memory aborts).
Verdict verdict_from_runner_failure(const RunnerReply& reply, const std::string& where, double limit_ms,
                                    const std::string& output);

}  // namespace kforge::judge
