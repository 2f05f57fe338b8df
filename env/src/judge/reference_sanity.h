// The in-evaluation backstop for tasks no candidate can pass: a reference
// output with NaN or Inf elements (e.g. `log` of normal inputs). allclose
// never matches NaN, so such a task makes every candidate `wrong` and charges
// it for the task's fault. Tasks are refused up front when they are checked
// or loaded (the reference is run once on the judge there); this catches what
// gets past that, such as a seed or shape variant the probe did not try, or
// the fresh inputs of a timed round. The verdict is not the candidate's: the
// evaluation ends as a system error (reward 0, no turn used) that names the
// task, output, seed and shape (docs/threat-model.md, "Who is to blame").
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "judge/case_plan.h"
#include "judge/verdict.h"

namespace kforge::judge {

// "" when every floating output of `reference` is finite, else e.g. "the
// reference output y has 12 NaN and 0 infinite values of 4096".
std::string non_finite_reference(const std::vector<at::Tensor>& reference, const ShapeCase& shape_case);

// The evaluation-level verdict for that finding: outcome not_run, summary
// "system error: invalid task <id>: ... (seed 0, base shape); ...".
Verdict invalid_task_verdict(const ShapeCase& shape_case, const std::string& finding, const std::string& where);

}  // namespace kforge::judge
