#include "judge/evaluation.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "judge/candidate_session.h"
#include "judge/case_plan.h"
#include "judge/elf_inspector.h"
#include "judge/json_fields.h"
#include "judge/profile.h"
#include "judge/task_fit.h"
#include "judge/timing.h"
#include "judge/verification.h"
#include "kforge/core/elapsed.h"

namespace kforge::judge {
namespace {

using Clock = std::chrono::steady_clock;

// The runner's output and limits must not let a candidate flood reports.
constexpr size_t kOutputTailBytes = 4096;

bool has_check(const Verdict& verdict, const std::string& check) {
  for (const auto& v : verdict.violations) {
    if (v.check == check) return true;
  }
  return false;
}

std::string rejection_summary(const std::vector<Violation>& violations) {
  std::string s = "rejected: ";
  for (size_t i = 0; i < violations.size() && i < 3; ++i) s += (i ? "; " : "") + violations[i].detail;
  if (violations.size() > 3) s += "; and " + std::to_string(violations.size() - 3) + " more";
  return s;
}

std::string timing_summary(const TimingSummary& t) {
  char buf[200];
  if (!t.speedup) {
    std::snprintf(buf, sizeof(buf), "; faster than the harness can resolve (%.4f ms overhead)", t.overhead.median_ms);
    return buf;
  }
  std::snprintf(buf, sizeof(buf), "; %.2fx vs eager (%.4f ms vs %.4f ms by %s, %lld samples, %s)", *t.speedup,
                t.candidate.median_ms, t.reference.median_ms, t.timer.c_str(),
                static_cast<long long>(t.candidate.samples), t.stop_reason.c_str());
  return buf;
}

// The verdict on a runner's `setup` reply: who is to blame when the
// candidate could not be loaded.
Verdict verdict_on_load(const RunnerReply& ready, SolutionMode mode, const env::EvalOptions& options,
                        CandidateSession* session) {
  Verdict verdict;
  if (!ready.ok() && !ready.candidate_ran) {
    // Before the runner said `loading` nothing of the candidate existed in
    // it: a spare that did not start, an arena it could not map, a sandbox
    // it could not set up are the harness's faults.
    verdict.outcome = Outcome::kNotRun;
    verdict.summary = "system error: the runner failed before the candidate was loaded (" +
                      std::string(runner_status_name(ready.status)) + ": " + ready.detail + ")";
  } else if (ready.status == RunnerReply::Status::kError && string_or(ready.body, "stage", "") == "load") {
    verdict.outcome = Outcome::kRejected;
    verdict.summary = "rejected: the runner could not load the candidate: " + ready.detail;
  } else if (ready.status == RunnerReply::Status::kError) {
    // After loading: the candidate's constructors ran in this process and
    // could have written this error themselves, or broken what failed.
    verdict.outcome = Outcome::kRejected;
    verdict.summary = "rejected: the runner failed right after loading the candidate (" +
                      string_or(ready.body, "stage", "?") + ": " + ready.detail + ")";
  } else if (!ready.ok()) {
    verdict =
        verdict_from_runner_failure(ready,
                                    mode == SolutionMode::kNvrtc ? "while loading the candidate's CUBIN"
                                                                 : "while loading the candidate (static constructors)",
                                    std::max(options.call_timeout_ms, 5000.0), session->runner().output_tail());
  }
  return verdict;
}

// One request on its way to a report: the report being filled, the
// request's deadline, and the judge's device, runners and gate.
class Evaluation {
 public:
  Evaluation(const env::EvalRequest& request, JudgeDevice* device, RunnerPool* pool, RunnerPool* profilers,
             GpuGate* gate, ReferenceCache* references)
      : request_(request),
        options_(request.options),
        device_(device),
        pool_(pool),
        profilers_(profilers),
        gate_(gate),
        references_(references),
        start_(Clock::now()),
        deadline_(ipc::Deadline::after_ms(options_.eval_timeout_ms)) {
    report_.device = device->name();
  }

  // 1. Static checks: nothing is loaded before the file passes them. False
  // when they decided the report.
  bool passes_static_checks();
  // 2. Shapes, arena and a runner with the candidate loaded. From here the
  // request works on the device: as a reader of the gate until it times.
  Verdict start_candidate();
  // 3. Verification, always before timing.
  Verdict verify();
  // 4. Timing, alone on the device; a failure replaces `verdict`, a
  // measurement adds to its summary.
  void time(Verdict* verdict);
  // 5. Profile (CUDA), when asked for and the verdict allows it.
  void profile(Verdict* verdict);
  // The runner retired and the verdict written into the report; the judge's
  // own context checked first, under the share (`context_error`).
  env::EvalReport finish(Verdict verdict, EvaluationCounters* counters, std::string* context_error);
  // The report as it stands, with the total time.
  env::EvalReport finish();
  // Where start-ups must not overlap timing (runner_pool.h), the next
  // candidate's runner starts now, after the timing; elsewhere take()
  // started it already and this only replaces spares that died waiting.
  void refill_spares() {
    const auto t = Clock::now();
    pool_->refill();
    report_.phase_ms["refill"] = ms_since(t);
  }

 private:
  // Time spent waiting for other candidates' exclusive parts is not this
  // candidate's: the request's deadline moves by it, so that queueing behind
  // other lanes never turns into this candidate's timeout.
  // `phase` says which part waited: phase_ms.gate_wait_<phase> (load,
  // time, profile) beside the total, phase_ms.gate_wait.
  // The runner's own account of its set-up (phase_ms.spawn_<part>). The
  // runner may hold candidate code by then, so only the known parts are
  // read, and only as figures within the request's time.
  void add_runner_setup_phases(const RunnerReply& ready) {
    if (!ready.ok() || !ready.body.contains("phase_ms")) return;
    const auto& phases = ready.body["phase_ms"];
    for (const char* part : {"arena", "loading_filter", "load", "after_load", "running_filter"}) {
      const auto it = phases.find(part);
      if (it == phases.end() || !it->is_number()) continue;
      const double ms = it->get<double>();
      if (std::isfinite(ms) && ms >= 0 && ms <= options_.eval_timeout_ms) {
        report_.phase_ms[std::string("spawn_") + part] = ms;
      }
    }
  }

  void add_gate_wait(double ms, const char* phase) {
    report_.phase_ms["gate_wait"] = report_.phase_ms.value("gate_wait", 0.0) + ms;
    const std::string key = std::string("gate_wait_") + phase;
    report_.phase_ms[key] = report_.phase_ms.value(key, 0.0) + ms;
    if (ms > 0) deadline_ = ipc::Deadline::after_ms(deadline_.remaining_ms() + ms);
  }
  // No start-up that could disturb a measurement meanwhile (runner_pool.h):
  // a spare of a pool that starts outside timing (the profiler's, with
  // KFORGE_PROFILER_START=outside_timing) must be done starting; the others
  // start beside timing and are not waited for. Then the GPU is ours alone: every
  // other judge on it has left its shared part or waits (gpu_gate.h).
  void settle_runners(const char* phase) {
    const auto s = Clock::now();
    pool_->settle(deadline_);
    if (profilers_ != nullptr) profilers_->settle(deadline_);
    report_.phase_ms["settle"] = report_.phase_ms.value("settle", 0.0) + ms_since(s);
    add_gate_wait(gate_->exclusive(), phase);
  }
  bool reject(Outcome outcome, std::string summary) {
    report_.outcome = outcome;
    report_.summary = std::move(summary);
    return false;
  }

  const env::EvalRequest& request_;
  const env::EvalOptions& options_;
  JudgeDevice* device_;
  RunnerPool* pool_;
  RunnerPool* profilers_;
  GpuGate* gate_;
  ReferenceCache* references_;
  Clock::time_point start_;
  ipc::Deadline deadline_;
  env::EvalReport report_;
  std::optional<CasePlan> plan_;
  RunnerLimits limits_;
  uint64_t judge_memory_bytes_ = 0;  // the judge's share with a lane budget: its tensors and its cache
  std::optional<CandidateSession> session_;
};

bool Evaluation::passes_static_checks() {
  const SolutionMode mode = request_.artifact.mode;
  if (mode != SolutionMode::kCpp && device_->backend() == "cpu") {
    return reject(Outcome::kRejected,
                  "rejected: solution mode " + solution_mode_name(mode) + " cannot run on the cpu backend (use cpp)");
  }
  // The CUDA runner runs shared objects with a kf_forward over device memory
  // (cuda, and torch_ext built against the torch shim) and NVRTC cubins by
  // their launch plans (nvrtc).
  if (mode == SolutionMode::kCpp && device_->backend() == "cuda") {
    return reject(Outcome::kRejected,
                  "rejected: solution mode cpp cannot run on the cuda backend (use cuda, nvrtc or torch_ext)");
  }
  if (mode == SolutionMode::kNvrtc && !request_.artifact.launch.is_object()) {
    return reject(Outcome::kRejected, "rejected: the nvrtc artifact has no launch plan");
  }
  if (!std::filesystem::is_regular_file(request_.artifact.path)) {
    return reject(Outcome::kNotRun, "system error: artifact " + request_.artifact.path.string() + " does not exist");
  }
  // Load checks look at what the dynamic loader would run and what the code
  // may call on the host: they apply to shared objects. A CUBIN has no host
  // code: the runner reads it as data and hands it to the CUDA driver, which
  // loads device code only, and what runs is the plan's kernels, launched by
  // the runner on the candidate's stream (the timing, leftover-work and
  // profiler checks still apply to them).
  if (mode != SolutionMode::kNvrtc) {
    auto t = Clock::now();
    ElfInspection inspection =
        inspect_candidate(request_.artifact.path, device_->symbol_policy(request_.task.libraries));
    report_.phase_ms["inspect"] = ms_since(t);
    if (!inspection.accepted) {
      report_.violations = inspection.violations;
      return reject(Outcome::kRejected, rejection_summary(inspection.violations));
    }
  }
  if (!request_.verify && !request_.time) {
    return reject(Outcome::kNotRun, "inspected only: neither verify nor time was requested");
  }
  // A task too large or too slow for this judge (task_fit.h). Reset refuses
  // such tasks before any candidate is charged; a request that reaches the
  // judge anyway is not run, and says why with figures.
  const auto t = Clock::now();
  const TaskFit fit = check_task_fit(request_.task, JudgeWork::kEvaluation, options_, *device_);
  report_.phase_ms["fit"] = ms_since(t);
  if (!fit.fits()) return reject(Outcome::kNotRun, "task cannot be judged: " + fit.problem);
  // A lane budget on the GPU (lane_memory_budget.h): the candidate's share,
  // which its runners enforce, and what the judge's own tensors need.
  limits_.device_memory_bytes = fit.candidate_bytes;
  // What the cache may keep is the judge's, beside the task's own tensors:
  // kept entries of other tasks go first (least recently used).
  if (references_) references_->set_bound(fit.reference_cache_bytes);
  judge_memory_bytes_ = fit.judge_bytes + fit.reference_cache_bytes;
  return true;
}

Verdict Evaluation::start_candidate() {
  add_gate_wait(gate_->shared(), "load");
  auto t = Clock::now();
  // Under the share: giving cached blocks back is device work.
  if (limits_.device_memory_bytes > 0) device_->keep_cached_memory_within(judge_memory_bytes_);
  plan_.emplace(plan_cases(request_.task, device_->page_size(), device_->arena_alignment()));
  report_.phase_ms["plan"] = ms_since(t);
  t = Clock::now();
  RunnerPool::Taken taken = pool_->take(deadline_);
  report_.phase_ms["runner_start"] = ms_since(t);
  t = Clock::now();
  session_.emplace(device_, std::move(taken.runner), &*plan_);
  report_.phase_ms["arena"] = ms_since(t);
  if (!taken.started.ok()) return verdict_on_load(taken.started, request_.artifact.mode, options_, &*session_);
  t = Clock::now();
  limits_.memory_bytes = options_.memory_limit_bytes;
  limits_.cpu_seconds = options_.eval_timeout_ms / 1000.0 + 5;
  // The load limit starts once the runner is up (RunnerPool::take).
  ipc::Deadline load_deadline =
      ipc::Deadline::earliest(deadline_, ipc::Deadline::after_ms(std::max(options_.call_timeout_ms, 5000.0)));
  RunnerReply ready = session_->start(runner_candidate(request_.artifact, request_.task), limits_, load_deadline);
  report_.phase_ms["spawn"] = ms_since(t);
  add_runner_setup_phases(ready);
  return verdict_on_load(ready, request_.artifact.mode, options_, &*session_);
}

Verdict Evaluation::verify() {
  auto t = Clock::now();
  VerificationResult v =
      verify_candidate(*plan_, options_, request_.input_seed, &*session_, device_, deadline_, references_);
  report_.phase_ms["verify"] = ms_since(t);
  for (const auto& [part, ms] : v.phase_ms.items()) report_.phase_ms["verify_" + part] = ms;
  report_.verification = std::move(v.cases);
  return std::move(v.verdict);
}

void Evaluation::time(Verdict* verdict) {
  settle_runners("time");
  auto t = Clock::now();
  TimingResult timing = time_candidate(*plan_, options_, &*session_, device_, deadline_);
  report_.phase_ms["time"] = ms_since(t);
  if (timing.timing && timing.timing->warmup_ms) report_.phase_ms["time_warmup"] = *timing.timing->warmup_ms;
  // Only the timing window is exclusive: the report, the runner's retirement
  // and the next request's load overlap other judges' work, never their
  // timing (a downgrade no writer can slip into, gpu_gate.h).
  gate_->shared();
  report_.timing = std::move(timing.timing);
  if (timing.verdict.failed()) {
    *verdict = std::move(timing.verdict);
  } else if (timing.timed && report_.timing) {
    verdict->summary += timing_summary(*report_.timing);
  }
}

// Energy, kernel attribution, hardware metrics, roofline. A time below the
// roofline says only that work escaped the timed interval; the profile still
// runs then, because its kernel attribution can say where the work went
// (another stream, or after the call returned), which is what the policy
// needs to hear. Its violations are added to the roofline's.
void Evaluation::profile(Verdict* verdict) {
  const bool explain_roofline = verdict->outcome == Outcome::kViolation && has_check(*verdict, "below_roofline");
  if ((verdict->failed() && !explain_roofline) || !request_.profile || !device_->has_profile_stage()) return;
  // The energy counter is the whole device's, like the timer's GPU; the
  // counters and the traced call must see this candidate alone too.
  if (options_.energy_window_ms > 0) settle_runners("profile");
  add_gate_wait(gate_->exclusive(), "profile");
  auto t = Clock::now();
  ProfileResult profile = profile_candidate(request_, *plan_, &*session_, device_, profilers_, limits_, deadline_,
                                            report_.timing ? &*report_.timing : nullptr);
  report_.phase_ms["profile"] = ms_since(t);
  gate_->shared();
  for (const auto& [part, ms] : profile.phase_ms.items()) report_.phase_ms["profile_" + part] = ms;
  report_.profile = std::move(profile.profile);
  if (!explain_roofline) {
    if (profile.verdict.failed()) *verdict = std::move(profile.verdict);
  } else {
    for (auto& v : profile.verdict.violations) {
      verdict->summary += "; " + v.check + ": " + v.detail;
      verdict->violations.push_back(std::move(v));
    }
  }
}

env::EvalReport Evaluation::finish(Verdict verdict, EvaluationCounters* counters, std::string* context_error) {
  if (report_.timing) report_.timing->sandbox = session_->sandbox_state();
  // A runner that is gone already was killed for a fault (crash, hang,
  // blocked syscall, tampering); healthy ones are retired here.
  if (!session_->runner().alive()) ++counters->runner_faults;
  // The check runs work through the judge's context (a cache flush on the
  // GPU): GPU work, so under the share, never beside another judge's timing.
  if (context_error != nullptr) *context_error = device_->context_error();
  // Waited for: the arena must outlive the runner's kernels (a CUDA
  // context's teardown ends them), or the next candidate's arena could
  // receive their writes. Without the gate: a context's teardown (~75 ms
  // on an H100) no more moves another judge's timed kernel than a context's
  // creation does (docs/execution.md, "The GPU gate"), and under a share it
  // would keep every other lane's timing waiting.
  gate_->release();
  const auto t = Clock::now();
  session_->runner().terminate();
  report_.phase_ms["retire"] = ms_since(t);
  report_.candidate_output = session_->runner().output_tail(kOutputTailBytes);
  // The arena goes back to the device now (it would at the request's end):
  // counted in the total, as the next request waits for it.
  const auto r = Clock::now();
  session_.reset();
  report_.phase_ms["release"] = ms_since(r);
  report_.outcome = verdict.outcome;
  report_.summary = verdict.summary;
  report_.violations = std::move(verdict.violations);
  return finish();
}

env::EvalReport Evaluation::finish() {
  env::EvalReport r = std::move(report_);
  r.phase_ms["total"] = ms_since(start_);
  return r;
}

}  // namespace

env::EvalReport evaluate(const env::EvalRequest& request, JudgeDevice* device, RunnerPool* pool,
                         EvaluationCounters* counters, RunnerPool* profilers, GpuGate* gate, ReferenceCache* references,
                         std::string* context_error) {
  GpuGate no_gate;
  Evaluation evaluation(request, device, pool, profilers, gate != nullptr ? gate : &no_gate, references);
  ++counters->evaluations;

  if (!evaluation.passes_static_checks()) return evaluation.finish();
  Verdict verdict = evaluation.start_candidate();
  if (!verdict.failed()) verdict = evaluation.verify();
  if (!verdict.failed() && request.time) evaluation.time(&verdict);
  evaluation.refill_spares();
  evaluation.profile(&verdict);
  return evaluation.finish(std::move(verdict), counters, context_error);
}

}  // namespace kforge::judge
