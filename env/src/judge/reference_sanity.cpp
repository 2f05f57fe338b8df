#include "judge/reference_sanity.h"

namespace kforge::judge {

std::string non_finite_reference(const std::vector<at::Tensor>& reference, const ShapeCase& shape_case) {
  for (size_t i = 0; i < reference.size(); ++i) {
    const at::Tensor& t = reference[i];
    if (!at::isFloatingType(t.scalar_type()) || at::isfinite(t).all().item<bool>()) continue;
    const int64_t nans = t.isnan().sum().item<int64_t>();
    const int64_t infs = t.isinf().sum().item<int64_t>();
    const std::string name = i < shape_case.outputs.size() ? shape_case.outputs[i].name : std::to_string(i);
    return "the reference output " + name + " has " + std::to_string(nans) + " NaN and " + std::to_string(infs) +
           " infinite values of " + std::to_string(t.numel());
  }
  return "";
}

Verdict invalid_task_verdict(const ShapeCase& shape_case, const std::string& finding, const std::string& where) {
  Verdict v;
  v.outcome = Outcome::kNotRun;
  v.summary = "system error: invalid task " + shape_case.task.id + ": " + finding + " " + where +
              "; no output can match it, so the candidate is not judged (fix the task: its inputs' init or its ops)";
  return v;
}

}  // namespace kforge::judge
