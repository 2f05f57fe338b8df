#include "judge/evaluation.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "common/elf_inspector.h"
#include "common/json_fields.h"
#include "judge/candidate_session.h"
#include "judge/case_plan.h"
#include "judge/profile.h"
#include "judge/task_fit.h"
#include "judge/timing.h"
#include "judge/verification.h"

namespace kforge::judge {
namespace {

using Clock = std::chrono::steady_clock;

using exec::ms_since;

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

}  // namespace

env::EvalReport evaluate(const env::EvalRequest& request, JudgeDevice* device, RunnerPool* pool,
                         EvaluationCounters* counters, RunnerPool* profilers, exec::GpuGate* gate) {
  const env::EvalOptions& options = request.options;
  auto start = Clock::now();
  exec::GpuGate no_gate;
  if (gate == nullptr) gate = &no_gate;
  exec::Deadline deadline = exec::Deadline::after_ms(options.eval_timeout_ms);
  env::EvalReport report;
  report.device = device->name();
  ++counters->evaluations;
  auto finish = [&](env::EvalReport r) {
    r.phase_ms["total"] = ms_since(start);
    return r;
  };

  // 1. Static checks: nothing is loaded before the file passes them.
  const SolutionMode mode = request.artifact.mode;
  if (mode != SolutionMode::kCpp && device->backend() == "cpu") {
    report.outcome = Outcome::kRejected;
    report.summary = "rejected: solution mode " + solution_mode_name(mode) + " cannot run on the cpu backend (use cpp)";
    return finish(report);
  }
  // The CUDA runner runs shared objects with a kf_forward over device memory
  // (cuda, and torch_ext built against the torch shim) and NVRTC cubins by
  // their launch plans (nvrtc).
  if (mode == SolutionMode::kCpp && device->backend() == "cuda") {
    report.outcome = Outcome::kRejected;
    report.summary = "rejected: solution mode cpp cannot run on the cuda backend (use cuda, nvrtc or torch_ext)";
    return finish(report);
  }
  if (mode == SolutionMode::kNvrtc && !request.artifact.launch.is_object()) {
    report.outcome = Outcome::kRejected;
    report.summary = "rejected: the nvrtc artifact has no launch plan";
    return finish(report);
  }
  if (!std::filesystem::is_regular_file(request.artifact.path)) {
    report.outcome = Outcome::kNotRun;
    report.summary = "system error: artifact " + request.artifact.path.string() + " does not exist";
    return finish(report);
  }
  // Load checks look at what the dynamic loader would run and what the code
  // may call on the host: they apply to shared objects. A CUBIN has no host
  // code: the runner reads it as data and hands it to the CUDA driver, which
  // loads device code only, and what runs is the plan's kernels, launched by
  // the runner on the candidate's stream (the timing, leftover-work and
  // profiler checks still apply to them).
  if (mode != SolutionMode::kNvrtc) {
    auto t = Clock::now();
    exec::ElfInspection inspection =
        exec::inspect_candidate(request.artifact.path, device->symbol_policy(request.task.libraries));
    report.phase_ms["inspect"] = ms_since(t);
    if (!inspection.accepted) {
      report.outcome = Outcome::kRejected;
      report.violations = inspection.violations;
      report.summary = rejection_summary(inspection.violations);
      return finish(report);
    }
  }
  if (!request.verify && !request.time) {
    report.outcome = Outcome::kNotRun;
    report.summary = "inspected only: neither verify nor time was requested";
    return finish(report);
  }
  // A task too large or too slow for this judge (task_fit.h). Reset refuses
  // such tasks before any candidate is charged; a request that reaches the
  // judge anyway is not run, and says why with figures.
  if (const TaskFit fit = check_task_fit(request.task, JudgeWork::kEvaluation, options, *device); !fit.fits()) {
    report.outcome = Outcome::kNotRun;
    report.summary = "task cannot be judged: " + fit.problem;
    return finish(report);
  }

  // 2. Shapes, arena and a runner with the candidate loaded. From here the
  // request works on the device: as a reader of the gate until it times.
  // Time spent waiting for other candidates' exclusive parts is not this
  // candidate's: the request's deadline moves by it, so that queueing behind
  // other lanes never turns into this candidate's timeout.
  auto add_gate_wait = [&](double ms) {
    report.phase_ms["gate_wait"] = report.phase_ms.value("gate_wait", 0.0) + ms;
    if (ms > 0) deadline = exec::Deadline::after_ms(deadline.remaining_ms() + ms);
  };
  add_gate_wait(gate->shared());
  CasePlan plan = plan_cases(request.task, device->page_size(), device->arena_alignment());
  auto t = Clock::now();
  CandidateSession session(device, pool->take(), &plan);
  exec::RunnerLimits limits;
  limits.memory_bytes = options.memory_limit_bytes;
  limits.cpu_seconds = options.eval_timeout_ms / 1000.0 + 5;
  exec::Deadline load_deadline =
      exec::Deadline::earliest(deadline, exec::Deadline::after_ms(std::max(options.call_timeout_ms, 5000.0)));
  exec::RunnerReply ready = session.start(runner_candidate(request.artifact, request.task), limits, load_deadline);
  report.phase_ms["spawn"] = ms_since(t);

  Verdict verdict;
  if (!ready.ok() && !ready.candidate_ran) {
    // Before the runner said `loading` nothing of the candidate existed in
    // it: a spare that did not start, an arena it could not map, a sandbox
    // it could not set up are the harness's faults.
    verdict.outcome = Outcome::kNotRun;
    verdict.summary = "system error: the runner failed before the candidate was loaded (" +
                      std::string(exec::runner_status_name(ready.status)) + ": " + ready.detail + ")";
  } else if (ready.status == exec::RunnerReply::Status::kError && exec::string_or(ready.body, "stage", "") == "load") {
    verdict.outcome = Outcome::kRejected;
    verdict.summary = "rejected: the runner could not load the candidate: " + ready.detail;
  } else if (ready.status == exec::RunnerReply::Status::kError) {
    // After loading: the candidate's constructors ran in this process and
    // could have written this error themselves, or broken what failed.
    verdict.outcome = Outcome::kRejected;
    verdict.summary = "rejected: the runner failed right after loading the candidate (" +
                      exec::string_or(ready.body, "stage", "?") + ": " + ready.detail + ")";
  } else if (!ready.ok()) {
    verdict =
        verdict_from_runner_failure(ready,
                                    mode == SolutionMode::kNvrtc ? "while loading the candidate's CUBIN"
                                                                 : "while loading the candidate (static constructors)",
                                    std::max(options.call_timeout_ms, 5000.0), session.runner().output_tail());
  }

  // 3. Verification, always before timing.
  if (!verdict.failed()) {
    t = Clock::now();
    VerificationResult v = verify_candidate(plan, options, request.input_seed, &session, device, deadline);
    report.phase_ms["verify"] = ms_since(t);
    report.verification = std::move(v.cases);
    verdict = std::move(v.verdict);
  }

  // 4. Timing, with no runner starting meanwhile (runner_pool.h): the spares
  // started after the previous candidate's timing must be done starting.
  // Then the GPU is ours alone: every other judge on it has left its shared
  // part or waits (gpu_gate.h).
  auto settle_runners = [&] {
    const auto s = Clock::now();
    pool->settle(deadline);
    if (profilers != nullptr) profilers->settle(deadline);
    report.phase_ms["settle"] = report.phase_ms.value("settle", 0.0) + ms_since(s);
    add_gate_wait(gate->exclusive());
  };
  if (!verdict.failed() && request.time) {
    settle_runners();
    t = Clock::now();
    TimingResult timing = time_candidate(plan, options, &session, device, deadline);
    report.phase_ms["time"] = ms_since(t);
    report.timing = std::move(timing.timing);
    if (timing.verdict.failed()) {
      verdict = std::move(timing.verdict);
    } else if (timing.timed && report.timing) {
      verdict.summary += timing_summary(*report.timing);
    }
  }
  // The next candidate's runner starts now, while this one is profiled (or
  // the report is written): after the timing, before the next one's.
  pool->refill();

  // 5. Profile (CUDA): energy, kernel attribution, hardware metrics, roofline.
  // A time below the roofline says only that work escaped the timed interval;
  // the profile still runs then, because its kernel attribution can say where
  // the work went (another stream, or after the call returned), which is what
  // the policy needs to hear. Its violations are added to the roofline's.
  const bool explain_roofline = verdict.outcome == Outcome::kViolation && has_check(verdict, "below_roofline");
  if ((!verdict.failed() || explain_roofline) && request.profile && device->backend() == "cuda") {
    // The energy counter is the whole device's, like the timer's GPU; the
    // counters and the traced call must see this candidate alone too.
    if (options.energy_window_ms > 0) settle_runners();
    add_gate_wait(gate->exclusive());
    t = Clock::now();
    ProfileResult profile = profile_candidate(request, plan, &session, device, profilers, limits, deadline,
                                              report.timing ? &*report.timing : nullptr);
    report.phase_ms["profile"] = ms_since(t);
    for (const auto& [part, ms] : profile.phase_ms.items()) report.phase_ms["profile_" + part] = ms;
    report.profile = std::move(profile.profile);
    if (!explain_roofline) {
      if (profile.verdict.failed()) verdict = std::move(profile.verdict);
    } else {
      for (auto& v : profile.verdict.violations) {
        verdict.summary += "; " + v.check + ": " + v.detail;
        verdict.violations.push_back(std::move(v));
      }
    }
  }
  if (report.timing) report.timing->sandbox = session.sandbox_state();

  // A runner that is gone already was killed for a fault (crash, hang,
  // blocked syscall, tampering); healthy ones are retired here.
  if (!session.runner().alive()) ++counters->runner_faults;
  session.runner().terminate();
  report.candidate_output = session.runner().output_tail(kOutputTailBytes);
  report.outcome = verdict.outcome;
  report.summary = verdict.summary;
  report.violations = std::move(verdict.violations);
  return finish(report);
}

}  // namespace kforge::judge
