#include "test_util.h"

namespace kforge::reward::testing {

Measurement timed_correct(double speedup_eager, std::optional<double> speedup_compile) {
  Measurement m;
  m.action = "profile";
  m.compiled = true;
  m.outcome = Outcome::kCorrect;
  m.timed = true;
  m.candidate_ms = 1.0;
  m.eager_ms = speedup_eager;
  m.speedup_eager = speedup_eager;
  m.speedup_compile = speedup_compile;
  return m;
}

Measurement failed(Outcome outcome) {
  Measurement m;
  m.action = "submit";
  m.compiled = outcome != Outcome::kCompileError;
  m.outcome = outcome;
  return m;
}

Measurement with_violation(Measurement m, const std::string& check) {
  m.violations.push_back({check, "evidence for " + check});
  return m;
}

RewardFunction from_yaml(const std::string& text) {
  return RewardFunction::from_document(Document::from_yaml_text(text, "test.yaml"));
}

double term_value(const std::string& term_flow, const Measurement& m, const RewardContext& ctx) {
  return from_yaml("name: t\nterms:\n  - " + term_flow + "\n").compute(m, ctx).total;
}

std::string input_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace kforge::reward::testing
