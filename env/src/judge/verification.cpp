#include "judge/verification.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "judge/json_fields.h"
#include "judge/leftover_work.h"
#include "judge/output_comparison.h"
#include "judge/output_quality.h"
#include "judge/reference_cache.h"
#include "judge/reference_sanity.h"
#include "judge/tolerance.h"
#include "kforge/core/elapsed.h"
#include "kforge/core/number_text.h"
#include "kforge/core/reference.h"

namespace kforge::judge {
namespace {

using Clock = std::chrono::steady_clock;

// Adds the wall time since `start` to `phase` of `phase_ms` and restarts the clock.
void lap(nlohmann::json* phase_ms, const char* phase, Clock::time_point* start) {
  const Clock::time_point now = Clock::now();
  (*phase_ms)[phase] = phase_ms->value(phase, 0.0) + elapsed_ms(*start, now);
  *start = now;
}

// Adds `ms` to `part`: the parts of a lap (phase_ms.check_<part>), which add
// up to it.
void add_ms(nlohmann::json* phase_ms, const char* part, double ms) {
  (*phase_ms)[part] = phase_ms->value(part, 0.0) + ms;
}

// Adds the wall time since `start` to `part` without restarting any clock.
void add_part(nlohmann::json* phase_ms, const char* part, Clock::time_point start) {
  add_ms(phase_ms, part, elapsed_ms(start, Clock::now()));
}

struct CaseContext {
  int seed;
  const ShapeCase* shape_case;
  std::string where() const { return "(seed " + std::to_string(seed) + ", " + shape_case->label() + ")"; }
};

// Statistics of all outputs of one call, folded into the per-case fields.
struct CallCheck {
  std::vector<ComparisonStats> outputs;
  // Where asked for: the quality statistics of each floating output that
  // passed, from the comparison's own float64 values.
  std::vector<std::optional<OutputQuality>> quality;
  double quality_ms = 0;  // of the check's time, measuring the quality
  bool passed() const {
    for (const auto& s : outputs) {
      if (!s.passed()) return false;
    }
    return true;
  }
  int first_failing() const {
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i].passed()) return static_cast<int>(i);
    }
    return -1;
  }
};

// `measure_quality`: also the quality statistics of each output that passed
// (the reference is finite everywhere: reference_sanity.h refuses the task
// otherwise), one output's float64 values alive at a time.
// `known`: the judge's own references are finite (checked when they ran).
CallCheck check_outputs(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& expected, const ShapeCase& c,
                        bool measure_quality = false, ExpectedValues known = ExpectedValues::kFinite) {
  CallCheck check;
  for (size_t i = 0; i < got.size(); ++i) {
    ComparisonValues values;
    check.outputs.push_back(compare_output(got[i], expected[i], tolerance_for(c.task, c.outputs[i].dtype),
                                           measure_quality ? &values : nullptr, known));
    if (!measure_quality || !check.outputs.back().passed() || !dtype_is_floating(c.outputs[i].dtype)) {
      check.quality.emplace_back();
      continue;
    }
    const Clock::time_point quality_start = Clock::now();
    check.quality.emplace_back(quality_of_passed_comparison(std::move(values)));
    check.quality_ms += elapsed_ms(quality_start, Clock::now());
  }
  return check;
}

void fold_stats(const CallCheck& check, const ShapeCase& c, nlohmann::json* j) {
  int64_t numel = 0, mismatches = 0, nans = 0;
  double max_abs = 0, max_rel = 0;
  nlohmann::json first = nullptr;
  for (size_t i = 0; i < check.outputs.size(); ++i) {
    const auto& s = check.outputs[i];
    numel += s.numel;
    mismatches += s.mismatches;
    nans += s.nan_count;
    max_abs = std::isnan(s.max_abs_err) || std::isnan(max_abs) ? std::nan("") : std::max(max_abs, s.max_abs_err);
    max_rel = std::max(max_rel, s.max_rel_err);
    if (first.is_null() && s.first_mismatch) {
      first = {{"output", c.outputs[i].name},
               {"index", s.first_mismatch->index},
               {"got", s.first_mismatch->got},
               {"expected", s.first_mismatch->expected}};
    }
  }
  // JSON has no NaN: a NaN error (candidate produced NaN) is reported as null
  // next to nan_count.
  (*j)["numel"] = numel;
  (*j)["mismatches"] = mismatches;
  (*j)["nan_count"] = nans;
  (*j)["max_abs_err"] = std::isnan(max_abs) ? nlohmann::json(nullptr) : nlohmann::json(max_abs);
  (*j)["max_rel_err"] = max_rel;
  (*j)["first_mismatch"] = first;
  if (check.outputs.size() > 1) {
    nlohmann::json per = nlohmann::json::array();
    for (size_t i = 0; i < check.outputs.size(); ++i) {
      nlohmann::json o = check.outputs[i].to_json();
      o["name"] = c.outputs[i].name;
      if (std::isnan(check.outputs[i].max_abs_err)) o["max_abs_err"] = nullptr;
      per.push_back(o);
    }
    (*j)["outputs"] = per;
  }
}

std::string describe_mismatch(const CallCheck& check, const ShapeCase& c) {
  int i = check.first_failing();
  const auto& s = check.outputs[static_cast<size_t>(i)];
  std::string text = "output " + c.outputs[static_cast<size_t>(i)].name + " differs at " +
                     std::to_string(s.mismatches) + " of " + std::to_string(s.numel) + " elements";
  if (s.nan_count > 0) {
    text += " (" + std::to_string(s.nan_count) + " NaN)";
  } else {
    text += ", max abs err " + format_significant(s.max_abs_err);
  }
  if (s.first_mismatch) {
    std::string idx;
    for (size_t k = 0; k < s.first_mismatch->index.size(); ++k) {
      idx += (k ? ", " : "") + std::to_string(s.first_mismatch->index[k]);
    }
    text += "; first at [" + idx + "]: got " + format_significant(s.first_mismatch->got) + ", expected " +
            format_significant(s.first_mismatch->expected);
  }
  return text;
}

// The inputs the candidate saw must still equal the pristine copies.
std::string find_input_mutation(const std::vector<at::Tensor>& arena_inputs, const std::vector<at::Tensor>& pristine,
                                const ShapeCase& c) {
  for (size_t i = 0; i < arena_inputs.size(); ++i) {
    if (bitwise_equal(arena_inputs[i], pristine[i])) continue;
    int64_t changed = arena_inputs[i].ne(pristine[i]).sum().item<int64_t>();
    return "kf_forward modified input " + c.inputs[i].name + " (" + std::to_string(changed) + " of " +
           std::to_string(arena_inputs[i].numel()) + " elements changed)";
  }
  return "";
}

// One seed of one shape case: what its phases share. The verdict of a failed
// check is returned; case_json collects the figures the report shows.
struct SeedRun {
  const ShapeCase& c;
  CaseContext ctx;
  const env::EvalOptions& options;
  CandidateSession* session;
  JudgeDevice* device;
  ipc::Deadline request_deadline;
  nlohmann::json* phase_ms;
  Clock::time_point* t;
  nlohmann::json* case_json;
  ReferenceCache* references;    // null: no cache
  const std::string& case_task;  // the case's task as JSON (the cache's key), "" without a cache
};

Verdict wrong(std::string summary) {
  Verdict v;
  v.outcome = Outcome::kWrong;
  v.summary = std::move(summary);
  return v;
}

// One call of kf_forward on poisoned outputs, then what the call may not have
// done: fail, leave work on another stream, write out of bounds, touch inputs.
std::optional<Verdict> call_and_check_conduct(const SeedRun& s, const std::vector<at::Tensor>& pristine_inputs) {
  s.session->poison_outputs();
  s.device->synchronize();
  ipc::Deadline call_deadline =
      ipc::Deadline::earliest(s.request_deadline, ipc::Deadline::after_ms(s.options.call_timeout_ms));
  RunnerReply reply = s.session->call(call_deadline);
  if (!reply.ok()) {
    return verdict_from_runner_failure(reply, "in kf_forward " + s.ctx.where(), s.options.call_timeout_ms,
                                       s.session->runner().output_tail());
  }
  s.device->synchronize();
  lap(s.phase_ms, "call", s.t);
  const auto rc = static_cast<int>(integer_or(reply.body, "rc", 0));  // int range (reply_problem)
  if (rc != 0) {
    Verdict v;
    v.outcome = Outcome::kRuntimeError;
    v.summary = "runtime error: kf_forward returned " + std::to_string(rc) + " " + s.ctx.where();
    (*s.case_json)["rc"] = rc;
    return v;
  }
  if (std::string foreign = check_foreign_stream(reply.body); !foreign.empty()) {
    return Verdict::violation("foreign_stream", foreign + " " + s.ctx.where());
  }
  // Before the inputs: a write past an output's end reaches the band
  // before it reaches the next tensor, and says more precisely what happened.
  if (std::string oob = s.session->out_of_bounds_write(); !oob.empty()) {
    return Verdict::violation("out_of_bounds_write", oob + " " + s.ctx.where());
  }
  std::string mutation = find_input_mutation(s.session->inputs(), pristine_inputs, s.c);
  if (!mutation.empty()) return Verdict::violation("input_mutation", mutation + " " + s.ctx.where());
  return std::nullopt;
}

// The outputs of run `run` against the reference: allclose first, then the
// checks that a loose tolerance alone must not pass.
std::optional<Verdict> check_run_outputs(const SeedRun& s, int run, const std::vector<at::Tensor>& reference,
                                         const std::vector<at::Tensor>& previous_reference) {
  const Clock::time_point compare_start = Clock::now();
  CallCheck check = check_outputs(s.session->outputs(), reference, s.c, /*measure_quality=*/true);
  add_ms(s.phase_ms, "check_compare", elapsed_ms(compare_start, Clock::now()) - check.quality_ms);
  add_ms(s.phase_ms, "check_quality", check.quality_ms);
  if (run == 0) fold_stats(check, s.c, s.case_json);
  if (!check.passed()) {
    if (!previous_reference.empty() && check_outputs(s.session->outputs(), previous_reference, s.c).passed()) {
      return Verdict::violation("stale_output",
                                "the outputs equal the reference of the previous seed, not "
                                "of this call's inputs (results reused across calls) " +
                                    s.ctx.where());
    }
    if (run > 0) fold_stats(check, s.c, s.case_json);
    return wrong(run == 0 ? "wrong: " + describe_mismatch(check, s.c) + " " + s.ctx.where()
                          : "wrong: the second run differs from the reference although the first matched "
                            "(reads of uninitialized memory or nondeterminism): " +
                                describe_mismatch(check, s.c) + " " + s.ctx.where());
  }
  double rel_l2 = 0;
  std::optional<QualityProblem> quality = judge_outputs_quality(check.quality, s.c, &rel_l2);
  if (run == 0) (*s.case_json)["rel_l2_err"] = rel_l2;
  if (!quality) return std::nullopt;
  (*s.case_json)["failed_check"] = quality->check;
  if (quality->is_violation()) return Verdict::violation(quality->check, quality->detail + " " + s.ctx.where());
  return wrong("wrong: " + quality->detail + " " + s.ctx.where());
}

// The first run's outputs are kept; a second run records how far it drifted.
void record_run(const SeedRun& s, int run, std::vector<at::Tensor>* first_run) {
  const Clock::time_point record_start = Clock::now();
  if (run == 0) {
    *first_run = s.session->snapshot_outputs();
    s.device->synchronize();
  } else {
    double diff = 0;
    for (size_t i = 0; i < first_run->size(); ++i) {
      diff = std::max(diff, max_abs_difference((*first_run)[i], s.session->outputs()[i]));
    }
    (*s.case_json)["run_diff"] = diff;
  }
  add_part(s.phase_ms, "check_record", record_start);
  lap(s.phase_ms, "check", s.t);
}

// A second run whose outputs are bit for bit the first's: every check of its
// outputs would read the same values against the same reference and give the
// first run's answers, so only the identity is checked (one pass over the
// outputs instead of the comparison's and the quality check's float64 passes,
// which on a 4096x4096 output are most of a seed's checks). True when it
// holds; then the check's lap is taken here.
bool second_run_is_identical(const SeedRun& s, const std::vector<at::Tensor>& first_run) {
  const Clock::time_point start = Clock::now();
  const std::vector<at::Tensor>& outputs = s.session->outputs();
  bool identical = first_run.size() == outputs.size();
  for (size_t i = 0; i < first_run.size() && identical; ++i) identical = bitwise_equal(first_run[i], outputs[i]);
  add_part(s.phase_ms, "check_repeat", start);
  (*s.case_json)["run_identical"] = identical;
  if (!identical) return false;
  (*s.case_json)["run_diff"] = 0.0;
  lap(s.phase_ms, "check", s.t);
  return true;
}

// How far the candidate and the reference each are from a float64 reference.
void compare_with_float64(const ShapeCase& c, const std::vector<at::Tensor>& inputs,
                          const std::vector<at::Tensor>& reference, const std::vector<at::Tensor>& first_run,
                          nlohmann::json* case_json) {
  std::vector<at::Tensor> exact = ref::run_reference(c.task, inputs, at::kDouble);
  // The float64 reference was not checked for finiteness.
  CallCheck vs_exact = check_outputs(first_run, exact, c, /*measure_quality=*/false, ExpectedValues::kAny);
  nlohmann::json f64 = nlohmann::json::object();
  fold_stats(vs_exact, c, &f64);
  double reference_err = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    reference_err = std::max(reference_err, max_abs_difference(reference[i].to(at::kDouble), exact[i]));
  }
  f64["reference_max_abs_err"] = reference_err;
  (*case_json)["float64"] = f64;
}

// This seed's inputs and the reference's outputs on them: the kept ones when
// the judge has them (reference_cache.h), else drawn and run now, and kept.
// A verdict when the task's reference is not finite there.
std::optional<Verdict> inputs_and_reference(const SeedRun& s, uint64_t input_seed,
                                            std::shared_ptr<const CachedReference>* drawn) {
  const std::string key = s.references ? ReferenceCache::key(s.case_task, input_seed) : "";
  if (s.references) {
    *drawn = s.references->find(key);
    if (*drawn) {
      (*s.case_json)["reference_reused"] = true;
      return std::nullopt;
    }
  }
  auto fresh = std::make_shared<CachedReference>();
  fresh->inputs = ref::make_inputs(s.c.task, input_seed, s.device->device());
  fresh->reference = ref::run_reference(s.c.task, fresh->inputs);
  if (std::string bad = non_finite_reference(fresh->reference, s.c); !bad.empty()) {
    return invalid_task_verdict(s.c, bad, s.ctx.where());
  }
  if (s.references) s.references->insert(key, fresh);
  *drawn = std::move(fresh);
  return std::nullopt;
}

// One seed: fresh inputs and their reference, then one run (two when
// determinism is checked), each checked for conduct and for its outputs.
// On success, *reference holds this seed's reference for the next seed's
// stale-output check.
std::optional<Verdict> verify_seed(const SeedRun& s, uint64_t input_seed, const std::vector<at::Tensor>& previous,
                                   std::vector<at::Tensor>* reference) {
  if (s.request_deadline.expired()) {
    Verdict v;
    v.outcome = Outcome::kTimeout;
    v.summary = "timed out: the evaluation exceeded eval_timeout_ms " + s.ctx.where();
    return v;
  }
  *s.t = Clock::now();
  std::shared_ptr<const CachedReference> drawn;
  if (auto v = inputs_and_reference(s, input_seed, &drawn)) return v;
  const std::vector<at::Tensor>& inputs = drawn->inputs;
  *reference = drawn->reference;
  s.device->synchronize();
  lap(s.phase_ms, "reference", s.t);
  s.session->load_inputs(inputs);

  std::vector<at::Tensor> first_run;
  const int runs = s.options.check_determinism ? 2 : 1;
  for (int run = 0; run < runs; ++run) {
    if (auto v = call_and_check_conduct(s, inputs)) return v;
    // The checks of the call's conduct (out-of-bounds bands, input
    // mutation), since the call's own lap.
    add_part(s.phase_ms, "check_conduct", *s.t);
    if (run > 0 && second_run_is_identical(s, first_run)) continue;
    // allclose, then the checks a loose tolerance alone must not pass.
    if (auto v = check_run_outputs(s, run, *reference, previous)) return v;
    record_run(s, run, &first_run);
  }
  if (s.options.float64_reference) compare_with_float64(s.c, inputs, *reference, first_run, s.case_json);
  return std::nullopt;
}

}  // namespace

VerificationResult verify_candidate(const CasePlan& plan, const env::EvalOptions& options, uint64_t input_seed,
                                    CandidateSession* session, JudgeDevice* device, ipc::Deadline request_deadline,
                                    ReferenceCache* references) {
  VerificationResult result;
  auto fail = [&](Verdict v, nlohmann::json case_json) {
    case_json["passed"] = false;
    result.cases.push_back(std::move(case_json));
    result.verdict = std::move(v);
    return result;
  };
  for (const ShapeCase& c : plan.cases) {
    ipc::Deadline bind_deadline =
        ipc::Deadline::earliest(request_deadline, ipc::Deadline::after_ms(options.call_timeout_ms));
    Clock::time_point t = Clock::now();
    RunnerReply bound = session->bind(c, bind_deadline);
    lap(&result.phase_ms, "bind", &t);
    if (!bound.ok()) {
      return fail(verdict_from_runner_failure(bound, "while binding the " + c.label(), options.call_timeout_ms,
                                              session->runner().output_tail()),
                  {{"variant", c.variant}, {"shapes", c.shapes_json()}});
    }
    std::vector<at::Tensor> previous_reference;
    const std::string case_task = references ? ReferenceCache::case_text(c.task) : "";
    for (int seed = 0; seed < options.seeds; ++seed) {
      nlohmann::json case_json = {{"seed", seed}, {"variant", c.variant}, {"shapes", c.shapes_json()}};
      // The input seed only where it differs from the index (an episode's
      // seed chose the inputs, eval.h EvalRequest::input_seed).
      if (input_seed != 0) case_json["input_seed"] = input_seed + static_cast<uint64_t>(seed);
      const SeedRun run{c,
                        CaseContext{seed, &c},
                        options,
                        session,
                        device,
                        request_deadline,
                        &result.phase_ms,
                        &t,
                        &case_json,
                        references,
                        case_task};
      std::vector<at::Tensor> reference;
      if (auto v = verify_seed(run, input_seed + static_cast<uint64_t>(seed), previous_reference, &reference)) {
        return fail(std::move(*v), std::move(case_json));
      }
      case_json["passed"] = true;
      result.cases.push_back(std::move(case_json));
      ++result.cases_passed;
      previous_reference = std::move(reference);
    }
  }
  result.verdict.summary = "correct: " + std::to_string(result.cases_passed) + " cases passed";
  return result;
}

}  // namespace kforge::judge
