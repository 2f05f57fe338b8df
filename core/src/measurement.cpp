#include "kforge/core/measurement.h"

#include <array>

namespace kforge {
namespace {

const std::array<std::pair<Outcome, std::string>, 9>& outcome_table() {
  static const std::array<std::pair<Outcome, std::string>, 9> kTable = {{
      {Outcome::kNotRun, "not_run"},
      {Outcome::kCompileError, "compile_error"},
      {Outcome::kRejected, "rejected"},
      {Outcome::kRuntimeError, "runtime_error"},
      {Outcome::kCrash, "crash"},
      {Outcome::kTimeout, "timeout"},
      {Outcome::kWrong, "wrong"},
      {Outcome::kViolation, "violation"},
      {Outcome::kCorrect, "correct"},
  }};
  return kTable;
}

template <typename T>
void put_optional(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

template <typename T>
void get_optional(const json& j, const char* key, std::optional<T>* v) {
  auto it = j.find(key);
  if (it != j.end() && !it->is_null()) *v = it->get<T>();
}

}  // namespace

const std::string& outcome_name(Outcome outcome) {
  for (const auto& [o, n] : outcome_table()) {
    if (o == outcome) return n;
  }
  return outcome_table()[0].second;
}

json to_json(const Measurement& m) {
  json j = {{"action", m.action},
            {"compiled", m.compiled},
            {"outcome", outcome_name(m.outcome)},
            {"correct", m.correct()},
            {"timed", m.timed},
            {"turn", m.turn},
            {"compile_errors_so_far", m.compile_errors_so_far}};
  put_optional(j, "candidate_ms", m.candidate_ms);
  put_optional(j, "eager_ms", m.eager_ms);
  put_optional(j, "compile_ms", m.compile_ms);
  put_optional(j, "speedup_eager", m.speedup_eager);
  put_optional(j, "speedup_compile", m.speedup_compile);
  put_optional(j, "speedup_eager_lo", m.speedup_eager_lo);
  put_optional(j, "speedup_eager_hi", m.speedup_eager_hi);
  put_optional(j, "speedup_confidence", m.speedup_confidence);
  put_optional(j, "own_kernel_fraction", m.own_kernel_fraction);
  put_optional(j, "energy_j", m.energy_j);
  j["violations"] = json::array();
  for (const auto& v : m.violations) j["violations"].push_back({{"check", v.check}, {"detail", v.detail}});
  return j;
}

Measurement measurement_from_json(const json& j) {
  Measurement m;
  m.action = j.value("action", "");
  m.compiled = j.value("compiled", false);
  const std::string outcome = j.value("outcome", "not_run");
  for (const auto& [o, n] : outcome_table()) {
    if (n == outcome) m.outcome = o;
  }
  m.timed = j.value("timed", false);
  m.turn = j.value("turn", 0);
  m.compile_errors_so_far = j.value("compile_errors_so_far", 0);
  get_optional(j, "candidate_ms", &m.candidate_ms);
  get_optional(j, "eager_ms", &m.eager_ms);
  get_optional(j, "compile_ms", &m.compile_ms);
  get_optional(j, "speedup_eager", &m.speedup_eager);
  get_optional(j, "speedup_compile", &m.speedup_compile);
  get_optional(j, "speedup_eager_lo", &m.speedup_eager_lo);
  get_optional(j, "speedup_eager_hi", &m.speedup_eager_hi);
  get_optional(j, "speedup_confidence", &m.speedup_confidence);
  get_optional(j, "own_kernel_fraction", &m.own_kernel_fraction);
  get_optional(j, "energy_j", &m.energy_j);
  if (j.contains("violations")) {
    for (const auto& v : j["violations"]) m.violations.push_back({v.value("check", ""), v.value("detail", "")});
  }
  return m;
}

}  // namespace kforge
