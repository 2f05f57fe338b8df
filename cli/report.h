// Human-readable and JSON reports of one evaluated solution (kforge eval,
// kforge demo), built from a step's result (its info and observation).
#pragma once

#include <string>

#include "kforge/core/solution.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/step_result.h"

namespace kforge::cli {

// The headline facts of a submit step, as the CLI shows them.
struct EvalSummary {
  std::string verdict;  // env::step_verdict
  std::string speedup;  // "2.03x" or "-"
  // Its confidence interval, "[1.91, 2.14]", or "" when the timing gave none.
  std::string speedup_interval;
  double reward = 0.0;
  bool system_error = false;
};

EvalSummary summarize(const env::StepResult& step);

std::string format_report(const TaskSpec& task, const Solution& solution, const std::string& backend,
                          const env::StepResult& step);
json report_json(const TaskSpec& task, const Solution& solution, const std::string& backend,
                 const env::StepResult& step);

}  // namespace kforge::cli
