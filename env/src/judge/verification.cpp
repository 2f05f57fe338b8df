#include "judge/verification.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "exec_common/json_fields.h"
#include "judge/leftover_work.h"
#include "judge/output_comparison.h"
#include "judge/output_quality.h"
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

struct CaseContext {
  int seed;
  const ShapeCase* shape_case;
  std::string where() const { return "(seed " + std::to_string(seed) + ", " + shape_case->label() + ")"; }
};

// Statistics of all outputs of one call, folded into the per-case fields.
struct CallCheck {
  std::vector<ComparisonStats> outputs;
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

CallCheck check_outputs(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& expected,
                        const ShapeCase& c) {
  CallCheck check;
  for (size_t i = 0; i < got.size(); ++i) {
    check.outputs.push_back(compare_output(got[i], expected[i], tolerance_for(c.task, c.outputs[i].dtype)));
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

}  // namespace

VerificationResult verify_candidate(const CasePlan& plan, const env::EvalOptions& options, uint64_t input_seed,
                                    CandidateSession* session, JudgeDevice* device, exec::Deadline request_deadline) {
  VerificationResult result;
  auto fail = [&](Verdict v, nlohmann::json case_json) {
    case_json["passed"] = false;
    result.cases.push_back(std::move(case_json));
    result.verdict = std::move(v);
    return result;
  };
  const int runs = options.check_determinism ? 2 : 1;

  for (const ShapeCase& c : plan.cases) {
    exec::Deadline bind_deadline =
        exec::Deadline::earliest(request_deadline, exec::Deadline::after_ms(options.call_timeout_ms));
    Clock::time_point t = Clock::now();
    exec::RunnerReply bound = session->bind(c, bind_deadline);
    lap(&result.phase_ms, "bind", &t);
    if (!bound.ok()) {
      return fail(verdict_from_runner_failure(bound, "while binding the " + c.label(), options.call_timeout_ms,
                                              session->runner().output_tail()),
                  {{"variant", c.variant}, {"shapes", c.shapes_json()}});
    }
    std::vector<at::Tensor> previous_reference;
    for (int seed = 0; seed < options.seeds; ++seed) {
      CaseContext ctx{seed, &c};
      nlohmann::json case_json = {{"seed", seed}, {"variant", c.variant}, {"shapes", c.shapes_json()}};
      // The input seed only where it differs from the index (an episode's
      // seed chose the inputs, eval.h EvalRequest::input_seed).
      if (input_seed != 0) case_json["input_seed"] = input_seed + static_cast<uint64_t>(seed);
      if (request_deadline.expired()) {
        Verdict v;
        v.outcome = Outcome::kTimeout;
        v.summary = "timed out: the evaluation exceeded eval_timeout_ms " + ctx.where();
        return fail(v, case_json);
      }
      t = Clock::now();
      std::vector<at::Tensor> inputs =
          ref::make_inputs(c.task, input_seed + static_cast<uint64_t>(seed), device->device());
      std::vector<at::Tensor> reference = ref::run_reference(c.task, inputs);
      if (std::string bad = non_finite_reference(reference, c); !bad.empty()) {
        return fail(invalid_task_verdict(c, bad, ctx.where()), case_json);
      }
      device->synchronize();
      lap(&result.phase_ms, "reference", &t);
      session->load_inputs(inputs);

      std::vector<at::Tensor> first_run;
      for (int run = 0; run < runs; ++run) {
        session->poison_outputs();
        device->synchronize();
        exec::Deadline call_deadline =
            exec::Deadline::earliest(request_deadline, exec::Deadline::after_ms(options.call_timeout_ms));
        exec::RunnerReply reply = session->call(call_deadline);
        if (!reply.ok()) {
          return fail(verdict_from_runner_failure(reply, "in kf_forward " + ctx.where(), options.call_timeout_ms,
                                                  session->runner().output_tail()),
                      case_json);
        }
        device->synchronize();
        lap(&result.phase_ms, "call", &t);
        const auto rc = static_cast<int>(exec::integer_or(reply.body, "rc", 0));  // int range (reply_problem)
        if (rc != 0) {
          Verdict v;
          v.outcome = Outcome::kRuntimeError;
          v.summary = "runtime error: kf_forward returned " + std::to_string(rc) + " " + ctx.where();
          case_json["rc"] = rc;
          return fail(v, case_json);
        }
        if (std::string foreign = check_foreign_stream(reply.body); !foreign.empty()) {
          return fail(Verdict::violation("foreign_stream", foreign + " " + ctx.where()), case_json);
        }
        // Before the inputs: a write past an output's end reaches the band
        // before it reaches the next tensor, and says more precisely what happened.
        if (std::string oob = session->out_of_bounds_write(); !oob.empty()) {
          return fail(Verdict::violation("out_of_bounds_write", oob + " " + ctx.where()), case_json);
        }
        std::string mutation = find_input_mutation(session->inputs(), inputs, c);
        if (!mutation.empty())
          return fail(Verdict::violation("input_mutation", mutation + " " + ctx.where()), case_json);

        CallCheck check = check_outputs(session->outputs(), reference, c);
        if (run == 0) fold_stats(check, c, &case_json);
        if (!check.passed()) {
          if (!previous_reference.empty() && check_outputs(session->outputs(), previous_reference, c).passed()) {
            return fail(Verdict::violation("stale_output",
                                           "the outputs equal the reference of the previous seed, not "
                                           "of this call's inputs (results reused across calls) " +
                                               ctx.where()),
                        case_json);
          }
          Verdict v;
          v.outcome = Outcome::kWrong;
          v.summary = run == 0 ? "wrong: " + describe_mismatch(check, c) + " " + ctx.where()
                               : "wrong: the second run differs from the reference although the first matched "
                                 "(reads of uninitialized memory or nondeterminism): " +
                                     describe_mismatch(check, c) + " " + ctx.where();
          if (run > 0) fold_stats(check, c, &case_json);
          return fail(v, case_json);
        }
        // allclose passed; a loose tolerance must not have been what let it pass.
        double rel_l2 = 0;
        std::optional<QualityProblem> quality = check_outputs_quality(session->outputs(), reference, c, &rel_l2);
        if (run == 0) case_json["rel_l2_err"] = rel_l2;
        if (quality) {
          case_json["failed_check"] = quality->check;
          if (quality->is_violation()) {
            return fail(Verdict::violation(quality->check, quality->detail + " " + ctx.where()), case_json);
          }
          Verdict v;
          v.outcome = Outcome::kWrong;
          v.summary = "wrong: " + quality->detail + " " + ctx.where();
          return fail(v, case_json);
        }
        if (run == 0) {
          first_run = session->snapshot_outputs();
          device->synchronize();
          lap(&result.phase_ms, "check", &t);
        } else {
          double diff = 0;
          for (size_t i = 0; i < first_run.size(); ++i) {
            diff = std::max(diff, max_abs_difference(first_run[i], session->outputs()[i]));
          }
          case_json["run_diff"] = diff;
          lap(&result.phase_ms, "check", &t);
        }
      }

      if (options.float64_reference) {
        std::vector<at::Tensor> exact = ref::run_reference(c.task, inputs, at::kDouble);
        CallCheck vs_exact = check_outputs(first_run, exact, c);
        nlohmann::json f64 = nlohmann::json::object();
        fold_stats(vs_exact, c, &f64);
        double reference_err = 0;
        for (size_t i = 0; i < exact.size(); ++i) {
          reference_err = std::max(reference_err, max_abs_difference(reference[i].to(at::kDouble), exact[i]));
        }
        f64["reference_max_abs_err"] = reference_err;
        case_json["float64"] = f64;
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
