#include "step_engine.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "kforge/core/elapsed.h"

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

void add_into(reward::RewardBreakdown& to, const reward::RewardBreakdown& from) {
  for (const auto& component : from.components) {
    // A plain variable, not a structured binding: C++17 lambdas cannot capture those (clang rejects it).
    const std::string& name = component.first;
    const double value = component.second;
    auto it = std::find_if(to.components.begin(), to.components.end(), [&](const auto& c) { return c.first == name; });
    if (it == to.components.end()) {
      to.components.emplace_back(name, value);
    } else {
      it->second += value;
    }
    to.total += value;
  }
}

}  // namespace

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
  req.profile = runs_profile(type, config_.eval);
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
  *wait_ms += ms_since(t0);
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
    if (m.speedup_eager && t.speedup_interval) {
      m.speedup_eager_lo = t.speedup_interval->lo;
      m.speedup_eager_hi = t.speedup_interval->hi;
      m.speedup_confidence = t.speedup_interval->confidence;
    }
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
  const auto started = Clock::now();
  StepWork work = check(ep, job);
  if (!job.end_reason.empty()) {
    StepResult out = end(ep, job, work);
    out.reward = work.paid.total;
    ep.episode_return += out.reward;
    out.info = describe(ep, job, work, out, started);
    return out;
  }
  if (work.rec.error == StepErrorKind::kNone) {
    ep.last_solution = job.solution;
    work.rec.solution_mode = solution_mode_name(job.solution->mode);
    work.attempt = act(ep, *job.action, *job.solution, job.compile);
    record(ep, work);
  }
  const Attempt& a = work.attempt;
  // A step that could not do what was asked is "invalid" to the reward
  // function: not judged (no failure value), only per-step terms apply.
  work.rec.measurement = measure(work.rec.error == StepErrorKind::kNone ? work.rec.action : "invalid", ep,
                                 a.compile ? &*a.compile : nullptr, a.eval ? &*a.eval : nullptr);
  StepResult out = settle(ep, job, work);
  if (out.observation.text.empty()) out.observation = step_observation(work.rec);
  out.reward = work.paid.total;
  ep.episode_return += out.reward;
  out.info = describe(ep, job, work, out, started);
  return out;
}

// Check: a step queued behind the one that ended its episode is not run; an
// action found invalid when it was sent stays so.
StepWork StepEngine::check(const EpisodeState& ep, const StepJob& job) const {
  StepWork work;
  StepRecord& rec = work.rec;
  rec.max_turns = config_.max_turns;
  rec.turn = ep.turns;
  rec.action = !job.end_reason.empty() ? "end" : job.action ? action_type_name(job.action->type) : "invalid";
  rec.error = job.error;
  rec.error_message = job.error_message;
  work.finished = ep.terminated || ep.truncated;
  if (work.finished) {
    rec.error = StepErrorKind::kEpisodeFinished;
    rec.error_message = std::string("it ended ") + (ep.terminated ? "with a submit" : "when its budget ran out") +
                        "; this step was not run (reset the environment to start a new episode)";
  }
  return work;
}

// Act: wait for the solution's compile, then judge it (verify, profile,
// submit) or run the analysis tool on it.
Attempt StepEngine::act(const EpisodeState& ep, const Action& action, const Solution& solution,
                        const std::shared_future<CompileResult>& compile) const {
  Attempt out;
  await_compile(compile, out);
  if (!out.compile || !out.compile->ok) return out;
  if (judges(action.type)) {
    judge(ep, action.type, out);
  } else if (action.type == ActionType::kAnalyze) {
    analyze(ep, action, solution, out);
  }
  return out;
}

void StepEngine::await_compile(const std::shared_future<CompileResult>& compile, Attempt& out) const {
  try {
    const auto tw = Clock::now();
    out.compile = compile.get();
    out.compile_wait_ms = ms_since(tw);
  } catch (const std::exception& e) {
    out.error = StepErrorKind::kSystem;
    out.error_message = std::string("compiling failed inside the environment: ") + e.what();
    return;
  }
  // A compile the system could not do is not the candidate's fault; one
  // that ran out of time is (heavy unrolling, template explosions).
  if (!out.compile->system_error.empty() && !out.compile->timed_out) {
    out.error = StepErrorKind::kSystem;
    out.error_message = "the compiler could not run: " + out.compile->system_error;
    out.compile.reset();
    return;
  }
  if (!out.compile->cache_hit) out.charged_ms += out.compile->compile_ms;
}

void StepEngine::judge(const EpisodeState& ep, ActionType type, Attempt& out) const {
  out.eval = evaluate(ep.task, ep.seed, out.compile->artifact, type, &out.eval_wait_ms);
  const double phases = phase_total(out.eval->phase_ms);
  out.charged_ms += phases > 0 ? phases : out.eval_wait_ms;
  // A judging request always reaches a verdict unless the system failed
  // (the executor's convention: not_run, "system error: ...").
  if (out.eval->outcome == Outcome::kNotRun) {
    out.error = StepErrorKind::kSystem;
    out.error_message = out.eval->summary.empty() ? "the judge could not evaluate the solution" : out.eval->summary;
  }
}

void StepEngine::analyze(const EpisodeState& ep, const Action& action, const Solution& solution, Attempt& out) const {
  AnalysisInput in;
  in.task = &ep.task;
  in.solution = &solution;
  in.artifact = &out.compile->artifact;
  in.device.arch = config_.arch;
  in.args = action.tool_args;
  const auto ta = Clock::now();
  const AnalysisResult result = analysis_.run(action.tool, in);
  out.analysis_ms = ms_since(ta);
  out.charged_ms += out.analysis_ms;
  out.analysis_tool = action.tool;
  out.analysis = to_json(result);
}

// The action's attempt into the step's record and the episode's state.
void StepEngine::record(EpisodeState& ep, StepWork& work) const {
  const Attempt& a = work.attempt;
  StepRecord& rec = work.rec;
  work.wait_ms += a.waited_ms();
  if (a.error != StepErrorKind::kNone) {
    rec.error = a.error;
    rec.error_message = a.error_message;
  }
  if (a.compile) {
    rec.compile = a.compile;
    rec.solution_hash = a.compile->artifact.hash;
    ep.last_solution_hash = a.compile->artifact.hash;
    if (!a.compile->ok) ++ep.compile_errors;
  }
  rec.eval = a.eval;
  if (!a.analysis_tool.empty()) {
    rec.analysis_tool = a.analysis_tool;
    rec.analysis = a.analysis;
  }
}

// Settle: count the turn, charge its time, end the episode by submit or by a
// budget (with the final evaluation of a truncated episode), and pay.
StepResult StepEngine::settle(EpisodeState& ep, const StepJob& job, StepWork& work) const {
  StepRecord& rec = work.rec;
  StepResult out;
  work.counts_turn = rec.error != StepErrorKind::kEpisodeFinished && rec.error != StepErrorKind::kSystem;
  if (work.finished) {
    out.terminated = ep.terminated;
    out.truncated = ep.truncated;
    return out;
  }
  if (!work.counts_turn) return out;
  ++ep.turns;
  ep.time_used_ms += work.attempt.charged_ms;
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
  work.step_reward = full;
  if (rec.truncated) {
    out.observation = final_evaluation(ep, job, work);
  } else if (config_.reward.paid_on == RewardPaidOn::kEveryStep || rec.terminated) {
    work.paid = full;
  } else {
    work.paid = only_terms(full, config_.reward.step_terms);
  }
  if (rec.terminated) ep.terminated = true;
  out.terminated = rec.terminated;
  out.truncated = rec.truncated;
  return out;
}

// End: the episode stops where it is, as if its budget had run out: the
// same final evaluation (the latest solution auto-submitted, or the value of
// a failed submission), so a policy that stops early never does better than
// one that tried and failed. Not a turn; nothing is charged to the budget.
StepResult StepEngine::end(EpisodeState& ep, const StepJob& job, StepWork& work) const {
  StepResult out;
  if (work.finished) {
    out.observation = step_observation(work.rec);
    out.terminated = ep.terminated;
    out.truncated = ep.truncated;
    return out;
  }
  // The turns left are paid as turns that did nothing (their per-step terms),
  // and the final evaluation as the last turn: exactly what running out of
  // turns pays, so an episode ended early costs no less than one that spent
  // its turns failing.
  reward::RewardBreakdown idle;
  for (int turn = ep.turns; turn + 1 < config_.max_turns; ++turn) {
    Measurement m = measure("invalid", ep, nullptr, nullptr);
    m.turn = turn;
    add_into(idle, only_terms(reward_.compute(m, ep.reward_context), config_.reward.step_terms));
  }
  StepRecord& rec = work.rec;
  rec.turn = std::max(ep.turns, config_.max_turns - 1);
  rec.measurement = measure("end", ep, nullptr, nullptr);
  rec.measurement.turn = rec.turn;
  rec.truncated = true;
  rec.truncation_reason = job.end_reason;
  out.observation = final_evaluation(ep, job, work);
  // A final evaluation the system could not do charges the policy nothing.
  if (!work.final_evaluation->system_error) add_into(work.paid, idle);
  out.truncated = true;
  return out;
}

// The final reward of a truncated episode: its last solution as if
// submitted, through the same act() as a submit action, reusing this step's
// evaluation when it already is one. Returns the step's observation.
Observation StepEngine::final_evaluation(EpisodeState& ep, const StepJob& job, StepWork& work) const {
  const StepRecord& rec = work.rec;
  StepRecord fin;
  fin.action = "submit";
  fin.turn = rec.turn;
  FinalEvaluation fe;
  if (config_.reward.on_truncation == TruncationReward::kAutoSubmit && ep.last_solution) {
    fe.auto_submitted = true;
    const ActionType type = job.action && rec.error == StepErrorKind::kNone ? job.action->type : ActionType::kAnalyze;
    const bool reusable = rec.compile && (!rec.compile->ok || type == ActionType::kProfile ||
                                          (type == ActionType::kVerify && !rec.measurement.correct()));
    fin.solution_hash = ep.last_solution_hash;
    if (reusable) {
      fin.measurement = rec.measurement;
    } else {
      const auto tf = Clock::now();
      Action submit;
      submit.type = ActionType::kSubmit;
      submit.solution = ep.last_solution;
      Attempt a;
      try {
        a = act(ep, submit, *ep.last_solution, start_compile(*ep.last_solution, ep.task));
      } catch (const std::exception& e) {
        a = Attempt{};
        a.error = StepErrorKind::kSystem;
        a.error_message = e.what();
      }
      work.wait_ms += a.waited_ms();
      if (a.compile) fin.solution_hash = a.compile->artifact.hash;
      fin.error = a.error;
      fin.error_message = a.error_message;
      fin.measurement = measure("submit", ep, a.compile ? &*a.compile : nullptr, a.eval ? &*a.eval : nullptr);
      fin.measurement.turn = rec.turn;
      fe.eval_ms = ms_since(tf);
      fe.eval_report = std::move(a.eval);
    }
    fin.measurement.action = "submit";
  } else {
    fin.measurement.action = "submit";
    fin.measurement.turn = rec.turn;
    fin.measurement.compile_errors_so_far = ep.compile_errors;
  }
  // The episode is over either way; a final evaluation the system could not
  // do is not scored against the policy.
  if (fin.error == StepErrorKind::kSystem) {
    fe.system_error = fin.error_message;
  } else {
    work.paid = reward_.compute(fin.measurement, ep.reward_context);
  }
  fe.measurement = fin.measurement;
  work.rec.truncated = true;
  ep.truncated = true;
  Observation obs = step_observation(rec);
  obs.text +=
      fin.error == StepErrorKind::kSystem
          ? "The environment could not evaluate your most recent solution (not your fault): " + fin.error_message + "\n"
          : truncation_note(fin, fe.auto_submitted);
  obs.data["final_evaluation"] = {{"auto_submitted", fe.auto_submitted},
                                  {"verdict", verdict_line(fin.measurement)},
                                  {"measurement", to_json(fin.measurement)}};
  work.final_evaluation = std::move(fe);
  return obs;
}

// Describe: the step's info (step_info.h).
StepInfo StepEngine::describe(const EpisodeState& ep, const StepJob& job, const StepWork& work, const StepResult& out,
                              Clock::time_point started) const {
  const StepRecord& rec = work.rec;
  const Attempt& a = work.attempt;
  StepInfo info;
  info.env_id = ep.env_id;
  info.episode = ep.episode;
  info.task_id = ep.task.id;
  info.seed = ep.seed;
  info.turn = rec.turn;
  info.action = rec.action;
  info.counted_turn = work.counts_turn;
  info.final = out.terminated || out.truncated;
  info.reward_components = work.paid;
  info.step_reward = work.step_reward;
  info.measurement = rec.measurement;
  StepTimings& t = info.timings;
  t.queue_ms = elapsed_ms(job.sent, started);
  t.compile_ms = a.compile ? a.compile->compile_ms : 0.0;
  t.compile_wait_ms = a.compile_wait_ms;
  t.eval_ms = a.eval_wait_ms;
  t.eval_phases = a.eval ? a.eval->phase_ms : json::object();
  t.analysis_ms = a.analysis_ms;
  t.step_ms = ms_since(started);
  // Time the environment itself spent: the step's wall time minus waiting on
  // the compile service, executor and tools.
  t.env_ms = std::max(0.0, t.step_ms - work.wait_ms);
  t.charged_ms = work.counts_turn ? a.charged_ms : 0.0;
  info.cache_hit = a.compile ? a.compile->cache_hit : false;
  info.solution_hash = rec.solution_hash;
  info.episode_return = ep.episode_return;
  info.budget = {ep.turns, config_.max_turns, ep.time_used_ms / 1000.0, config_.time_budget_s, ep.compile_errors};
  if (rec.error != StepErrorKind::kNone) info.error = StepError{rec.error, rec.error_message};
  if (!job.raw_call.is_null()) {
    // The call is echoed for the trainer's logs, but not a large one: a
    // policy's 400 KB of nested brackets doubled every reply and, from 8
    // clients, slowed every other client's steps 10x (bench/server --flood 4).
    if (approx_json_bytes(job.raw_call, kToolCallEchoBytes) <= kToolCallEchoBytes) {
      info.tool_call = job.raw_call;
    } else {
      info.tool_call_preview = call_preview(job.raw_call);
    }
  }
  info.eval_report = a.eval;
  info.final_evaluation = work.final_evaluation;
  if (rec.truncated) info.truncation_reason = rec.truncation_reason;
  return info;
}

}  // namespace kforge::env::internal
