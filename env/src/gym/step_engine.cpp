#include "step_engine.h"

#include <cmath>
#include <exception>
#include <string>
#include <vector>

namespace kforge::env::internal {
namespace {

// info.tool_call echoes calls up to this size (JSON text); a larger one is
// described by its size and the start of its text.
constexpr size_t kToolCallEchoBytes = 4096;
constexpr size_t kToolCallPreviewBytes = 256;

// About the size of `value` as JSON text (strings unescaped), counted until
// it passes `cap`: cheap whatever the value's size or depth.
size_t approx_json_bytes(const json& value, size_t cap) {
  size_t bytes = 0;
  std::vector<const json*> todo = {&value};
  while (!todo.empty() && bytes <= cap) {
    const json* v = todo.back();
    todo.pop_back();
    if (v->is_string()) {
      bytes += v->get_ref<const std::string&>().size() + 2;
    } else if (v->is_object()) {
      bytes += 2;
      for (auto it = v->begin(); it != v->end(); ++it) {
        bytes += it.key().size() + 4;
        todo.push_back(&it.value());
      }
    } else if (v->is_array()) {
      bytes += 2;
      for (const auto& item : *v) todo.push_back(&item);
    } else {
      bytes += 8;
    }
  }
  return bytes;
}

// The start of a string, cut at a UTF-8 character boundary.
std::string head_of(const std::string& text, size_t n) { return text.substr(0, utf8_prefix_bytes(text, n)); }

// What a large call looked like: its name, and its arguments' first bytes
// and size when they are text (the usual {name, arguments} shape); for any
// other shape, its type.
json call_preview(const json& call) {
  json preview = json::object();
  if (call.is_object()) {
    for (const char* key : {"name", "arguments"}) {
      const auto it = call.find(key);
      if (it == call.end()) continue;
      if (it->is_string()) {
        const std::string& text = it->get_ref<const std::string&>();
        preview[key] = head_of(text, kToolCallPreviewBytes);
        preview[std::string(key) + "_bytes"] = text.size();
      } else {
        preview[std::string(key) + "_type"] = it->type_name();
      }
    }
  } else if (call.is_string()) {
    const std::string& text = call.get_ref<const std::string&>();
    preview["text"] = head_of(text, kToolCallPreviewBytes);
    preview["text_bytes"] = text.size();
  } else {
    preview["type"] = call.type_name();
  }
  return preview;
}

bool judges(ActionType t) { return t == ActionType::kVerify || t == ActionType::kProfile || t == ActionType::kSubmit; }
bool times(ActionType t) { return t == ActionType::kProfile || t == ActionType::kSubmit; }

double positive_or_zero(double v) { return std::isfinite(v) && v > 0 ? v : 0.0; }

// The judge's own time for a request: its "total" phase when it reports one
// (the other phases are parts of it), else the sum of the phases.
double phase_total(const json& j) {
  double total = 0.0;
  if (!j.is_object()) return total;
  if (auto it = j.find("total"); it != j.end() && it->is_number()) return it->get<double>();
  for (const auto& v : j) {
    if (v.is_number()) total += v.get<double>();
  }
  return total;
}

reward::RewardBreakdown only_terms(const reward::RewardBreakdown& full, const std::vector<std::string>& names) {
  reward::RewardBreakdown out;
  for (const auto& [name, value] : full.components) {
    for (const auto& n : names) {
      if (n == name) {
        out.components.emplace_back(name, value);
        out.total += value;
      }
    }
  }
  return out;
}

}  // namespace

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

StepEngine::StepEngine(const EnvConfig& config, CompileService& compiler, Executor& executor,
                       const reward::RewardFunction& reward, const AnalysisRegistry& analysis, CompileContext context)
    : config_(config),
      compiler_(compiler),
      executor_(executor),
      reward_(reward),
      analysis_(analysis),
      context_(std::move(context)) {}

std::shared_future<CompileResult> StepEngine::start_compile(const Solution& solution, const TaskSpec& task) const {
  return compiler_.submit(solution, compile_context_for(task, context_)).share();
}

void StepEngine::prepare(StepJob& job, std::optional<Solution>& last_solution, const TaskSpec& task) const {
  if (job.error != StepErrorKind::kNone) return;
  const Action& a = *job.action;
  if (a.solution) {
    job.solution = a.solution;
    last_solution = a.solution;
  } else if (last_solution) {
    job.solution = last_solution;
  } else {
    job.error = StepErrorKind::kNoSolution;
    job.error_message = "there is no earlier solution in this episode to " + action_type_name(a.type) +
                        "; pass your complete code in \"source\"";
    return;
  }
  try {
    job.compile = start_compile(*job.solution, task);
  } catch (const InputError& e) {
    job.error = StepErrorKind::kInvalidAction;
    job.error_message = e.what();
  } catch (const std::exception& e) {
    job.error = StepErrorKind::kSystem;
    job.error_message = std::string("the compile service failed: ") + e.what();
  }
}

EvalReport StepEngine::evaluate(const TaskSpec& task, uint64_t episode_seed, const Artifact& artifact, ActionType type,
                                double* wait_ms) const {
  EvalRequest req;
  req.task = task;
  req.input_seed = verification_input_seed(episode_seed);
  req.artifact = artifact;
  req.verify = true;
  req.time = times(type);
  // Kernel attribution (foreign streams, work after return) on every timed
  // evaluation; hardware counters only where they are asked for.
  req.profile = times(type);
  req.options = config_.eval;
  req.options.hardware_metrics =
      config_.eval.hardware_metrics && (type == ActionType::kProfile || config_.eval.hardware_metrics_on_submit);
  const auto t0 = Clock::now();
  EvalReport report;
  try {
    report = executor_.submit(std::move(req)).get();
  } catch (const std::exception& e) {
    // The executor promises a report; if it breaks that promise the step
    // still gets an answer instead of taking the pool down.
    report.outcome = Outcome::kNotRun;
    report.summary = std::string("the executor failed: ") + e.what();
  }
  *wait_ms += ms_between(t0, Clock::now());
  return report;
}

Measurement StepEngine::measure(const std::string& action, const EpisodeState& ep, const CompileResult* compile,
                                const EvalReport* eval) const {
  Measurement m;
  m.action = action;
  m.turn = ep.turns;
  m.compile_errors_so_far = ep.compile_errors;
  if (compile) {
    m.compiled = compile->ok;
    if (!compile->ok) {
      m.outcome = compile->rejected ? Outcome::kRejected : Outcome::kCompileError;
      return m;
    }
  }
  if (!eval) return m;
  m.outcome = eval->outcome;
  m.violations = eval->violations;
  if (eval->timing) {
    const TimingSummary& t = *eval->timing;
    const double cand = positive_or_zero(t.candidate.median_ms);
    const double ref = positive_or_zero(t.reference.median_ms);
    if (cand > 0 && t.candidate.samples > 0) {
      m.timed = true;
      m.candidate_ms = cand;
    }
    if (ref > 0) m.eager_ms = ref;
    if (m.timed && ref > 0) m.speedup_eager = ref / cand;
    const double energy = positive_or_zero(t.candidate.energy_j.value_or(0.0));
    if (energy > 0) m.energy_j = energy;
    // The torch.compile baseline was measured elsewhere (data synthesis);
    // its ratio to eager transfers to this run only on the same kind of
    // device, so it is scaled by this run's eager time and used only then.
    const auto& b = ep.task.baselines;
    if (m.timed && ref > 0 && b && b->eager_ms && b->compile_ms && *b->eager_ms > 0 && *b->compile_ms > 0 &&
        (b->device.empty() || b->device == eval->device)) {
      m.compile_ms = ref * (*b->compile_ms / *b->eager_ms);
      m.speedup_compile = *m.compile_ms / cand;
    }
  }
  if (eval->profile && eval->profile->own_kernel_fraction) m.own_kernel_fraction = *eval->profile->own_kernel_fraction;
  return m;
}

StepResult StepEngine::run(EpisodeState& ep, StepJob& job) const {
  const auto t0 = Clock::now();
  StepRecord rec;
  rec.max_turns = config_.max_turns;
  rec.turn = ep.turns;
  rec.action = job.action ? action_type_name(job.action->type) : "invalid";
  rec.error = job.error;
  rec.error_message = job.error_message;
  double wait_ms = 0.0;
  double charged_ms = 0.0;
  double compile_wait_ms = 0.0, eval_wait_ms = 0.0, analysis_ms = 0.0;
  json eval_phases = json::object();

  const bool finished = ep.terminated || ep.truncated;
  if (finished) {
    rec.error = StepErrorKind::kEpisodeFinished;
    rec.error_message = std::string("it ended ") + (ep.terminated ? "with a submit" : "when its budget ran out") +
                        "; this step was not run (reset the environment to start a new episode)";
  }
  std::optional<CompileResult> compile;
  std::optional<EvalReport> eval;
  if (rec.error == StepErrorKind::kNone) {
    const Action& a = *job.action;
    ep.last_solution = job.solution;
    rec.solution_mode = solution_mode_name(job.solution->mode);
    try {
      const auto tw = Clock::now();
      compile = job.compile.get();
      compile_wait_ms = ms_between(tw, Clock::now());
      wait_ms += compile_wait_ms;
    } catch (const std::exception& e) {
      rec.error = StepErrorKind::kSystem;
      rec.error_message = std::string("compiling failed inside the environment: ") + e.what();
    }
    // A compile the system could not do is not the candidate's fault; one
    // that ran out of time is (heavy unrolling, template explosions).
    if (compile && !compile->system_error.empty() && !compile->timed_out) {
      rec.error = StepErrorKind::kSystem;
      rec.error_message = "the compiler could not run: " + compile->system_error;
      compile.reset();
    }
    if (compile) {
      rec.compile = compile;
      rec.solution_hash = compile->artifact.hash;
      ep.last_solution_hash = compile->artifact.hash;
      if (!compile->cache_hit) charged_ms += compile->compile_ms;
      if (!compile->ok) ++ep.compile_errors;
      if (compile->ok && judges(a.type)) {
        eval = evaluate(ep.task, ep.seed, compile->artifact, a.type, &eval_wait_ms);
        wait_ms += eval_wait_ms;
        eval_phases = eval->phase_ms;
        const double phases = phase_total(eval->phase_ms);
        charged_ms += phases > 0 ? phases : eval_wait_ms;
        rec.eval = eval;
        // A judging request always reaches a verdict unless the system
        // failed (the executor's convention: not_run, "system error: ...").
        if (eval->outcome == Outcome::kNotRun) {
          rec.error = StepErrorKind::kSystem;
          rec.error_message = eval->summary.empty() ? "the judge could not evaluate the solution" : eval->summary;
        }
      }
      if (compile->ok && a.type == ActionType::kAnalyze) {
        AnalysisInput in;
        in.task = &ep.task;
        in.solution = &*job.solution;
        in.artifact = &compile->artifact;
        in.device.arch = config_.arch;
        in.args = a.tool_args;
        const auto ta = Clock::now();
        const AnalysisResult result = analysis_.run(a.tool, in);
        analysis_ms = ms_between(ta, Clock::now());
        wait_ms += analysis_ms;
        charged_ms += analysis_ms;
        rec.analysis_tool = a.tool;
        rec.analysis = to_json(result);
      }
    }
  }

  const bool counts_turn = rec.error != StepErrorKind::kEpisodeFinished && rec.error != StepErrorKind::kSystem;
  // A step that could not do what was asked is "invalid" to the reward
  // function: not judged (no failure value), only per-step terms apply.
  rec.measurement = measure(rec.error == StepErrorKind::kNone ? rec.action : "invalid", ep,
                            compile ? &*compile : nullptr, eval ? &*eval : nullptr);
  StepResult out;
  reward::RewardBreakdown paid;
  json step_reward = json::object();
  json final_info = nullptr;
  if (finished) {
    out.terminated = ep.terminated;
    out.truncated = ep.truncated;
  } else if (counts_turn) {
    ++ep.turns;
    ep.time_used_ms += charged_ms;
    rec.terminated = rec.error == StepErrorKind::kNone && job.action->type == ActionType::kSubmit;
    if (!rec.terminated) {
      if (ep.turns >= config_.max_turns) {
        rec.truncated = true;
        rec.truncation_reason = "max_turns";
      } else if (config_.time_budget_s > 0 && ep.time_used_ms >= config_.time_budget_s * 1000.0) {
        rec.truncated = true;
        rec.truncation_reason = "time_budget";
      }
    }
    const reward::RewardBreakdown full = reward_.compute(rec.measurement, ep.reward_context);
    step_reward = full.to_json();
    if (rec.truncated) {
      // The final reward of a truncated episode: its last solution as if
      // submitted, reusing this step's evaluation when it already is one.
      StepRecord fin;
      fin.action = "submit";
      fin.turn = rec.turn;
      bool auto_submitted = false;
      const bool auto_submit = config_.reward.on_truncation == TruncationReward::kAutoSubmit && ep.last_solution;
      if (auto_submit) {
        auto_submitted = true;
        const ActionType type =
            job.action && rec.error == StepErrorKind::kNone ? job.action->type : ActionType::kAnalyze;
        const bool reusable = rec.compile && (!rec.compile->ok || type == ActionType::kProfile ||
                                              (type == ActionType::kVerify && !rec.measurement.correct()));
        fin.solution_hash = ep.last_solution_hash;
        if (reusable) {
          fin.measurement = rec.measurement;
        } else {
          std::optional<CompileResult> fc;
          std::optional<EvalReport> fe;
          const auto tf = Clock::now();
          try {
            fc = start_compile(*ep.last_solution, ep.task).get();
            if (fc->ok) fe = evaluate(ep.task, ep.seed, fc->artifact, ActionType::kSubmit, &wait_ms);
            fin.solution_hash = fc->artifact.hash;
            if (!fc->system_error.empty() && !fc->timed_out) {
              fin.error = StepErrorKind::kSystem;
              fin.error_message = fc->system_error;
            } else if (fe && fe->outcome == Outcome::kNotRun) {
              fin.error = StepErrorKind::kSystem;
              fin.error_message = fe->summary;
            }
          } catch (const std::exception& e) {
            fe.reset();
            fc.reset();
            fin.error = StepErrorKind::kSystem;
            fin.error_message = e.what();
          }
          const double final_ms = ms_between(tf, Clock::now());
          fin.measurement = measure("submit", ep, fc ? &*fc : nullptr, fe ? &*fe : nullptr);
          fin.measurement.turn = rec.turn;
          final_info = {{"eval_ms", final_ms}};
          if (fe) final_info["eval_report"] = to_json(*fe);
        }
        fin.measurement.action = "submit";
      } else {
        fin.measurement.action = "submit";
        fin.measurement.turn = rec.turn;
        fin.measurement.compile_errors_so_far = ep.compile_errors;
      }
      if (!final_info.is_object()) final_info = json::object();
      // The episode is over either way; a final evaluation the system could
      // not do is not scored against the policy.
      if (fin.error == StepErrorKind::kSystem) {
        final_info["system_error"] = fin.error_message;
      } else {
        paid = reward_.compute(fin.measurement, ep.reward_context);
      }
      final_info["auto_submitted"] = auto_submitted;
      final_info["measurement"] = to_json(fin.measurement);
      rec.truncated = true;
      ep.truncated = true;
      Observation obs = step_observation(rec);
      obs.text +=
          fin.error == StepErrorKind::kSystem
              ? "The environment could not evaluate your most recent solution (not your fault): " + fin.error_message +
                    "\n"
              : truncation_note(fin, auto_submitted);
      obs.data["final_evaluation"] = {{"auto_submitted", auto_submitted},
                                      {"verdict", verdict_line(fin.measurement)},
                                      {"measurement", to_json(fin.measurement)}};
      out.observation = std::move(obs);
    } else if (config_.reward.paid_on == RewardPaidOn::kEveryStep || rec.terminated) {
      paid = full;
    } else {
      paid = only_terms(full, config_.reward.step_terms);
    }
    if (rec.terminated) ep.terminated = true;
    out.terminated = rec.terminated;
    out.truncated = rec.truncated;
  }
  if (out.observation.text.empty()) out.observation = step_observation(rec);
  out.reward = paid.total;
  ep.episode_return += out.reward;

  const double step_ms = ms_between(t0, Clock::now());
  json timings = {{"queue_ms", ms_between(job.sent, t0)},
                  {"compile_ms", compile ? compile->compile_ms : 0.0},
                  {"compile_wait_ms", compile_wait_ms},
                  {"eval_ms", eval_wait_ms},
                  {"eval_phases", eval_phases},
                  {"analysis_ms", analysis_ms},
                  {"step_ms", step_ms},
                  // Time the environment itself spent: the step's wall time
                  // minus waiting on the compile service, executor and tools.
                  {"env_ms", std::max(0.0, step_ms - wait_ms)},
                  {"charged_ms", counts_turn ? charged_ms : 0.0}};
  json info = {{"env_id", ep.env_id},
               {"episode", ep.episode},
               {"task_id", ep.task.id},
               {"seed", ep.seed},
               {"turn", rec.turn},
               {"action", rec.action},
               {"counted_turn", counts_turn},
               {"final", out.terminated || out.truncated},
               {"reward_components", paid.to_json()},
               {"step_reward", step_reward},
               {"measurement", to_json(rec.measurement)},
               {"timings", timings},
               {"cache_hit", compile ? compile->cache_hit : false},
               {"solution_hash", rec.solution_hash},
               {"episode_return", ep.episode_return},
               {"budget",
                {{"turns_used", ep.turns},
                 {"max_turns", config_.max_turns},
                 {"time_used_s", ep.time_used_ms / 1000.0},
                 {"time_budget_s", config_.time_budget_s},
                 {"compile_errors", ep.compile_errors}}}};
  info["error"] = rec.error == StepErrorKind::kNone
                      ? json(nullptr)
                      : json{{"kind", step_error_kind_name(rec.error)}, {"message", rec.error_message}};
  if (!job.raw_call.is_null()) {
    // The call is echoed for the trainer's logs, but not a large one: a
    // policy's 400 KB of nested brackets doubled every reply and, from 8
    // clients, slowed every other client's steps 10x (bench/server --flood 4).
    if (approx_json_bytes(job.raw_call, kToolCallEchoBytes) <= kToolCallEchoBytes) {
      info["tool_call"] = job.raw_call;
    } else {
      info["tool_call_preview"] = call_preview(job.raw_call);
    }
  }
  if (eval) info["eval_report"] = to_json(*eval);
  if (!final_info.is_null()) info["final_evaluation"] = final_info;
  if (rec.truncated) info["truncation_reason"] = rec.truncation_reason;
  out.info = std::move(info);
  return out;
}

}  // namespace kforge::env::internal
