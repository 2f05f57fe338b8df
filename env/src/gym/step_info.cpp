#include "kforge/env/step_info.h"

#include <limits>
#include <utility>

#include "kforge/core/error.h"

namespace kforge::env {
namespace {

// Any number, including what a non-finite double became in memory: the
// reader gives back what the engine wrote.
double number(const Field& f) {
  if (!f.value().is_number()) f.fail("a number");
  return f.value().get<double>();
}

int integer(const Field& f) {
  const int64_t v = f.as_int();
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) f.fail("a 32-bit integer");
  return static_cast<int>(v);
}

uint64_t unsigned_integer(const Field& f) {
  if (!f.value().is_number_unsigned()) {
    if (f.value().is_number_integer() && f.value().get<int64_t>() >= 0) return f.value().get<uint64_t>();
    f.fail("a non-negative integer");
  }
  return f.value().get<uint64_t>();
}

// {"total": t, "<term>": value, ...} (RewardBreakdown::to_json).
reward::RewardBreakdown breakdown_from(const Field& f) {
  reward::RewardBreakdown out;
  f.as_object();
  for (auto it = f.value().begin(); it != f.value().end(); ++it) {
    const Field term(f.document(), it.value(), json_pointer_append(f.pointer(), it.key()));
    if (it.key() == "total") {
      out.total = number(term);
    } else {
      out.components.emplace_back(it.key(), number(term));
    }
  }
  return out;
}

// The core and judge readers throw nlohmann's errors for a wrong type; the
// field they were reading is named here.
Measurement measurement_from(const Field& f) {
  f.as_object();
  try {
    return measurement_from_json(f.value());
  } catch (const json::exception& e) {
    f.fail_message(std::string("not a measurement: ") + e.what());
  }
}

EvalReport eval_report_from(const Field& f) {
  f.as_object();
  try {
    return eval_report_from_json(f.value());
  } catch (const json::exception& e) {
    f.fail_message(std::string("not an evaluation report: ") + e.what());
  }
}

StepErrorKind error_kind_from(const Field& f) {
  const std::string name = f.as_string();
  for (StepErrorKind k : {StepErrorKind::kInvalidAction, StepErrorKind::kNoSolution, StepErrorKind::kEpisodeFinished,
                          StepErrorKind::kSystem}) {
    if (step_error_kind_name(k) == name) return k;
  }
  f.fail("one of invalid_action, no_solution, episode_finished, system");
}

StepTimings timings_from(const Field& f) {
  StepTimings t;
  ObjectReader r = f.as_object();
  for (auto& [key, value] : {std::pair<const char*, double*>{"queue_ms", &t.queue_ms},
                             {"compile_ms", &t.compile_ms},
                             {"compile_wait_ms", &t.compile_wait_ms},
                             {"eval_ms", &t.eval_ms},
                             {"analysis_ms", &t.analysis_ms},
                             {"step_ms", &t.step_ms},
                             {"env_ms", &t.env_ms},
                             {"charged_ms", &t.charged_ms}}) {
    if (auto v = r.optional(key)) *value = number(*v);
  }
  if (auto v = r.optional("eval_phases")) {
    v->as_object();
    t.eval_phases = v->value();
  }
  return t;
}

StepBudget budget_from(const Field& f) {
  StepBudget b;
  ObjectReader r = f.as_object();
  if (auto v = r.optional("turns_used")) b.turns_used = integer(*v);
  if (auto v = r.optional("max_turns")) b.max_turns = integer(*v);
  if (auto v = r.optional("time_used_s")) b.time_used_s = number(*v);
  if (auto v = r.optional("time_budget_s")) b.time_budget_s = number(*v);
  if (auto v = r.optional("compile_errors")) b.compile_errors = integer(*v);
  return b;
}

FinalEvaluation final_evaluation_from(const Field& f) {
  FinalEvaluation fe;
  ObjectReader r = f.as_object();
  if (auto v = r.optional("auto_submitted")) fe.auto_submitted = v->as_bool();
  if (auto v = r.optional("measurement")) fe.measurement = measurement_from(*v);
  if (auto v = r.optional("eval_ms")) fe.eval_ms = number(*v);
  if (auto v = r.optional("eval_report")) fe.eval_report = eval_report_from(*v);
  if (auto v = r.optional("system_error")) fe.system_error = v->as_string();
  return fe;
}

}  // namespace

json to_json(const FinalEvaluation& fe) {
  json j = json::object();
  if (fe.eval_ms) j["eval_ms"] = *fe.eval_ms;
  if (fe.eval_report) j["eval_report"] = to_json(*fe.eval_report);
  if (fe.system_error) j["system_error"] = *fe.system_error;
  j["auto_submitted"] = fe.auto_submitted;
  j["measurement"] = to_json(fe.measurement);
  return j;
}

json to_json(const StepTimings& t) {
  return {{"queue_ms", t.queue_ms}, {"compile_ms", t.compile_ms},   {"compile_wait_ms", t.compile_wait_ms},
          {"eval_ms", t.eval_ms},   {"eval_phases", t.eval_phases}, {"analysis_ms", t.analysis_ms},
          {"step_ms", t.step_ms},   {"env_ms", t.env_ms},           {"charged_ms", t.charged_ms}};
}

json to_json(const StepInfo& s) {
  const StepBudget& b = s.budget;
  json info = {{"env_id", s.env_id},
               {"episode", s.episode},
               {"task_id", s.task_id},
               {"seed", s.seed},
               {"turn", s.turn},
               {"action", s.action},
               {"counted_turn", s.counted_turn},
               {"final", s.final},
               {"reward_components", s.reward_components.to_json()},
               {"step_reward", s.step_reward ? s.step_reward->to_json() : json::object()},
               {"measurement", to_json(s.measurement)},
               {"timings", to_json(s.timings)},
               {"cache_hit", s.cache_hit},
               {"solution_hash", s.solution_hash},
               {"episode_return", s.episode_return},
               {"budget",
                {{"turns_used", b.turns_used},
                 {"max_turns", b.max_turns},
                 {"time_used_s", b.time_used_s},
                 {"time_budget_s", b.time_budget_s},
                 {"compile_errors", b.compile_errors}}}};
  info["error"] =
      s.error ? json{{"kind", step_error_kind_name(s.error->kind)}, {"message", s.error->message}} : json(nullptr);
  if (!s.tool_call.is_null()) info["tool_call"] = s.tool_call;
  if (!s.tool_call_preview.is_null()) info["tool_call_preview"] = s.tool_call_preview;
  if (s.eval_report) info["eval_report"] = to_json(*s.eval_report);
  if (s.final_evaluation) info["final_evaluation"] = to_json(*s.final_evaluation);
  if (!s.truncation_reason.empty()) info["truncation_reason"] = s.truncation_reason;
  return info;
}

StepInfo step_info_from_json(const json& j, const std::string& where) {
  const Document doc = Document::from_value(j, where);
  return step_info_from(Field(doc, doc.root, ""));
}

StepInfo step_info_from(const Field& f) {
  ObjectReader r = f.as_object();
  StepInfo s;
  if (auto v = r.optional("env_id")) s.env_id = integer(*v);
  if (auto v = r.optional("episode")) s.episode = unsigned_integer(*v);
  if (auto v = r.optional("task_id")) s.task_id = v->as_string();
  if (auto v = r.optional("seed")) s.seed = unsigned_integer(*v);
  if (auto v = r.optional("turn")) s.turn = integer(*v);
  if (auto v = r.optional("action")) s.action = v->as_string();
  if (auto v = r.optional("counted_turn")) s.counted_turn = v->as_bool();
  if (auto v = r.optional("final")) s.final = v->as_bool();
  if (auto v = r.optional("reward_components")) s.reward_components = breakdown_from(*v);
  if (auto v = r.optional("step_reward"); v && !(v->value().is_object() && v->value().empty())) {
    s.step_reward = breakdown_from(*v);
  }
  if (auto v = r.optional("measurement")) s.measurement = measurement_from(*v);
  if (auto v = r.optional("timings")) s.timings = timings_from(*v);
  if (auto v = r.optional("cache_hit")) s.cache_hit = v->as_bool();
  if (auto v = r.optional("solution_hash")) s.solution_hash = v->as_string();
  if (auto v = r.optional("episode_return")) s.episode_return = number(*v);
  if (auto v = r.optional("budget")) s.budget = budget_from(*v);
  if (auto v = r.optional("error")) {
    ObjectReader e = v->as_object();
    StepError error;
    error.kind = error_kind_from(e.required("kind"));
    if (auto m = e.optional("message")) error.message = m->as_string();
    s.error = std::move(error);
  }
  if (auto v = r.optional("tool_call")) s.tool_call = v->value();
  if (auto v = r.optional("tool_call_preview")) s.tool_call_preview = v->value();
  if (auto v = r.optional("eval_report")) s.eval_report = eval_report_from(*v);
  if (auto v = r.optional("final_evaluation")) s.final_evaluation = final_evaluation_from(*v);
  if (auto v = r.optional("truncation_reason")) s.truncation_reason = v->as_string();
  return s;
}

std::string step_verdict(const StepInfo& info) {
  if (info.error) return "error: " + step_error_kind_name(info.error->kind);
  return outcome_name(info.scored_measurement().outcome);
}

}  // namespace kforge::env
