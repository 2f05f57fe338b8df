// JSON forms of the evaluation types (eval.h): options from configs, requests
// on their way to the judge, reports on their way back and into observations.
#include <array>
#include <limits>

#include "kforge/core/error.h"
#include "kforge/core/input_limits.h"
#include "kforge/env/eval.h"

namespace kforge::env {
namespace {

Outcome parse_outcome(const std::string& name) {
  static const std::array<Outcome, 9> kAll = {Outcome::kNotRun,       Outcome::kCompileError, Outcome::kRejected,
                                              Outcome::kRuntimeError, Outcome::kCrash,        Outcome::kTimeout,
                                              Outcome::kWrong,        Outcome::kViolation,    Outcome::kCorrect};
  for (Outcome o : kAll) {
    if (outcome_name(o) == name) return o;
  }
  throw InputError("unknown outcome '" + name + "'");
}

json artifact_to_json(const Artifact& a) {
  return {{"hash", a.hash},     {"mode", solution_mode_name(a.mode)}, {"path", a.path.string()},
          {"launch", a.launch}, {"resources", a.resources},           {"libraries", a.libraries}};
}

Artifact artifact_from_field(const Field& field) {
  ObjectReader r = field.as_object();
  Artifact a;
  if (auto f = r.optional("hash")) a.hash = f->as_string();
  a.mode = parse_solution_mode(r.required("mode"));
  a.path = r.required("path").as_string();
  if (auto f = r.optional("launch")) a.launch = f->value();
  if (auto f = r.optional("resources")) a.resources = f->value();
  if (auto f = r.optional("libraries")) a.libraries = f->as_string_list();
  r.finish();
  return a;
}

// Speedups at which a reward steps: a short list (a reward has a few tiers)
// of positive, finite numbers.
std::vector<double> speedup_edges(const Field& f) {
  constexpr size_t kMaxEdges = 64;
  std::vector<double> edges;
  const std::vector<Field> items = f.as_array();
  if (items.size() > kMaxEdges) f.fail("at most " + std::to_string(kMaxEdges) + " speedups");
  for (const Field& item : items) {
    const double v = item.as_number_in(0.0, limits::kMaxRewardMagnitude);
    if (!(v > 0)) item.fail("a positive speedup");
    edges.push_back(v);
  }
  return edges;
}

}  // namespace

json to_json(const EvalOptions& o) {
  return {{"seeds", o.seeds},
          {"float64_reference", o.float64_reference},
          {"check_determinism", o.check_determinism},
          {"warmup_ms", o.warmup_ms},
          {"warmup_min_ms", o.warmup_min_ms},
          {"max_time_ms", o.max_time_ms},
          {"min_samples", o.min_samples},
          {"max_samples", o.max_samples},
          {"target_rse", o.target_rse},
          {"timing_input_sets", o.timing_input_sets},
          {"cuda_graph", o.cuda_graph},
          {"stop_when_decided", o.stop_when_decided},
          {"decision_edges", o.decision_edges},
          {"decision_compile_edges", o.decision_compile_edges},
          {"decision_resolution", o.decision_resolution},
          {"hardware_metrics", o.hardware_metrics},
          {"hardware_metrics_on_submit", o.hardware_metrics_on_submit},
          {"profile_on_submit", o.profile_on_submit},
          {"energy_window_ms", o.energy_window_ms},
          {"call_timeout_ms", o.call_timeout_ms},
          {"eval_timeout_ms", o.eval_timeout_ms},
          {"memory_limit_bytes", o.memory_limit_bytes},
          {"judge_memory_limit_bytes", o.judge_memory_limit_bytes},
          {"reference_cache_bytes", o.reference_cache_bytes}};
}

bool runs_profile(ActionType type, const EvalOptions& options) {
  return type == ActionType::kProfile || (type == ActionType::kSubmit && options.profile_on_submit);
}

EvalOptions parse_eval_options(const Field& field, EvalOptions base) {
  // Every duration is bounded (limits::kMaxConfigDurationS) so that no
  // deadline computed from it can overflow; the error names the field.
  static constexpr double kMaxMs = limits::kMaxConfigDurationS * 1000.0;
  auto duration_ms = [](const Field& f, bool positive) {
    const double v = f.as_number_in(0.0, kMaxMs);
    if (positive && !(v > 0)) f.fail("a positive number of milliseconds, at most " + std::to_string(kMaxMs));
    return v;
  };
  ObjectReader r = field.as_object();
  EvalOptions o = base;
  if (auto f = r.optional("seeds")) {
    o.seeds = static_cast<int>(f->as_int_in(1, static_cast<int64_t>(kMaxVerificationSeeds)));
  }
  if (auto f = r.optional("float64_reference")) o.float64_reference = f->as_bool();
  if (auto f = r.optional("check_determinism")) o.check_determinism = f->as_bool();
  if (auto f = r.optional("warmup_ms")) o.warmup_ms = duration_ms(*f, false);
  if (auto f = r.optional("warmup_min_ms")) o.warmup_min_ms = duration_ms(*f, false);
  if (auto f = r.optional("max_time_ms")) o.max_time_ms = duration_ms(*f, false);
  if (auto f = r.optional("min_samples")) o.min_samples = static_cast<int>(f->as_int_in(1, 1000000));
  if (auto f = r.optional("max_samples")) o.max_samples = static_cast<int>(f->as_int_in(1, 1000000));
  // A relative standard error above 1 (100 %) would stop at min_samples.
  if (auto f = r.optional("target_rse")) o.target_rse = f->as_number_in(0.0, 1.0);
  if (auto f = r.optional("timing_input_sets")) o.timing_input_sets = static_cast<int>(f->as_int_in(1, 64));
  if (auto f = r.optional("cuda_graph")) o.cuda_graph = f->as_bool();
  if (auto f = r.optional("stop_when_decided")) o.stop_when_decided = f->as_bool();
  if (auto f = r.optional("decision_edges")) o.decision_edges = speedup_edges(*f);
  if (auto f = r.optional("decision_compile_edges")) o.decision_compile_edges = speedup_edges(*f);
  // A half-width of ln(2) already cannot tell 1x from 4x.
  if (auto f = r.optional("decision_resolution")) o.decision_resolution = f->as_number_in(0.0, 1.0);
  if (auto f = r.optional("hardware_metrics")) o.hardware_metrics = f->as_bool();
  if (auto f = r.optional("hardware_metrics_on_submit")) o.hardware_metrics_on_submit = f->as_bool();
  if (auto f = r.optional("profile_on_submit")) o.profile_on_submit = f->as_bool();
  if (auto f = r.optional("energy_window_ms")) {
    o.energy_window_ms = f->as_nonnegative_number();
    if (o.energy_window_ms > 10000) f->fail("at most 10000 (ms per side; ~100 is enough for NVML's counter)");
  }
  if (auto f = r.optional("call_timeout_ms")) o.call_timeout_ms = duration_ms(*f, true);
  if (auto f = r.optional("eval_timeout_ms")) o.eval_timeout_ms = duration_ms(*f, true);
  if (auto f = r.optional("memory_limit_bytes")) {
    o.memory_limit_bytes = static_cast<uint64_t>(f->as_int_in(1 << 20, std::numeric_limits<int64_t>::max()));
  }
  if (auto f = r.optional("judge_memory_limit_bytes")) {
    o.judge_memory_limit_bytes = static_cast<uint64_t>(f->as_int_in(0, std::numeric_limits<int64_t>::max()));
  }
  if (auto f = r.optional("reference_cache_bytes")) {
    o.reference_cache_bytes = static_cast<uint64_t>(f->as_int_in(0, std::numeric_limits<int64_t>::max()));
  }
  r.finish();
  if (o.max_samples < o.min_samples) {
    field.fail_message("max_samples (" + std::to_string(o.max_samples) + ") is below min_samples (" +
                       std::to_string(o.min_samples) + ")");
  }
  return o;
}

json to_json(const EvalRequest& r) {
  return {{"task", to_json(r.task)},   {"artifact", artifact_to_json(r.artifact)},
          {"verify", r.verify},        {"time", r.time},
          {"profile", r.profile},      {"options", to_json(r.options)},
          {"input_seed", r.input_seed}};
}

EvalRequest eval_request_from_json(const json& j) {
  Document doc = Document::from_value(j, "<eval request>");
  ObjectReader r = doc.root_object();
  EvalRequest req;
  Field task = r.required("task");
  req.task = parse_task(Document::from_value(task.value(), "<eval request task>"));
  req.artifact = artifact_from_field(r.required("artifact"));
  if (auto f = r.optional("verify")) req.verify = f->as_bool();
  if (auto f = r.optional("time")) req.time = f->as_bool();
  if (auto f = r.optional("profile")) req.profile = f->as_bool();
  if (auto f = r.optional("options")) req.options = parse_eval_options(*f);
  if (auto f = r.optional("input_seed")) {
    if (!f->value().is_number_unsigned()) f->fail("a non-negative integer");
    req.input_seed = f->value().get<uint64_t>();
  }
  r.finish();
  return req;
}

uint64_t verification_input_seed(uint64_t episode_seed) {
  // Seed 0 keeps the inputs 0..seeds-1 that every earlier report and test
  // recorded. Any other seed goes through SplitMix64's finalizer, a bijection
  // of the 64-bit integers: no two episode seeds share a base, and the bases
  // are spread so that windows of kMaxVerificationSeeds inputs overlap only by
  // chance (about 2^-53 for a pair of seeds). A multiplication wrapped: seeds
  // 0 and 2^61 gave the same inputs.
  if (episode_seed == 0) return 0;
  return splitmix64(episode_seed);
}

json to_json(const EvalReport& r) {
  json violations = json::array();
  for (const auto& v : r.violations) violations.push_back({{"check", v.check}, {"detail", v.detail}});
  return {{"outcome", outcome_name(r.outcome)},
          {"correct", r.correct()},
          {"summary", r.summary},
          {"violations", violations},
          {"verification", r.verification},
          {"timing", r.timing ? to_json(*r.timing) : json(nullptr)},
          {"profile", r.profile ? to_json(*r.profile) : json(nullptr)},
          {"candidate_output", r.candidate_output},
          {"phase_ms", r.phase_ms},
          {"device", r.device}};
}

EvalReport eval_report_from_json(const json& j) {
  EvalReport r;
  r.outcome = parse_outcome(j.at("outcome").get<std::string>());
  r.summary = j.value("summary", "");
  for (const auto& v : j.value("violations", json::array())) {
    r.violations.push_back({v.at("check").get<std::string>(), v.value("detail", "")});
  }
  r.verification = j.value("verification", json::array());
  if (auto it = j.find("timing"); it != j.end() && !it->is_null()) {
    r.timing = timing_summary_from_json(*it, "<eval report timing>");
  }
  if (auto it = j.find("profile"); it != j.end() && !it->is_null()) {
    r.profile = profile_summary_from_json(*it, "<eval report profile>");
  }
  r.candidate_output = j.value("candidate_output", "");
  r.phase_ms = j.value("phase_ms", json::object());
  r.device = j.value("device", "");
  return r;
}

}  // namespace kforge::env
