#include "synth_baseline.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "kforge/core/jsonl.h"
#include "kforge/core/process.h"
#include "kforge/env/executor.h"
#include "kforge/env/reference_probe.h"

namespace kforge::cli {
namespace fs = std::filesystem;

namespace {

// Baseline timing keeps the judge's stopping rule (warm-up by time, then
// samples until the median's relative standard error is under target_rse,
// or the sampling-time cap, or max_samples) with a looser target and shorter
// caps than a candidate's evaluation (EvalOptions defaults: 50 ms warm-up,
// RSE 0.5 %, 2 s, 3 input sets), so that a baseline costs ~0.05-0.3 s of
// judge time: the throughput target is 6,000 tasks per GPU-hour. The clock
// and cache flush are the denominator's own (judge/timing_protocol.h).
// docs/data-synthesis.md lists them.
env::EvalOptions baseline_options() {
  env::EvalOptions o;
  o.warmup_ms = 10.0;
  o.min_samples = 10;
  o.max_samples = 500;
  o.target_rse = 0.01;
  o.max_time_ms = 200.0;
  o.timing_input_sets = 2;
  o.eval_timeout_ms = 60000.0;
  return o;
}

}  // namespace

struct SynthBaselines::Impl {
  std::unique_ptr<env::Executor> executor;
  env::EvalOptions options = baseline_options();
};

SynthBaselines::SynthBaselines(const std::string& backend) : impl_(std::make_unique<Impl>()) {
  env::ExecutorConfig config;
  config.backend = env::parse_backend(backend);
  impl_->executor = env::make_executor(config);
}

SynthBaselines::~SynthBaselines() = default;

synth::BaselineResult SynthBaselines::measure(const TaskSpec& task) {
  // One request: the reference check `kforge task check` and the env's reset
  // run (base shape and every variant), then the timing. The filters already
  // ran in-process; the judge's verdict is the one the environment will
  // apply, so a task it refuses is rejected rather than exported.
  env::ReferenceRequest request;
  request.task = task;
  request.check = true;
  request.time = true;
  request.options = impl_->options;
  const env::ReferenceReport report = impl_->executor->submit_reference(std::move(request)).get();
  synth::BaselineResult r;
  r.device = report.device;
  if (report.invalid()) {
    r.invalid = report.problem;
    return r;
  }
  if (!report.ok() || !report.timing || !report.timing->contains("median_ms")) {
    r.error = report.problem.empty() ? "the judge returned no timing" : report.problem;
    return r;
  }
  r.eager_ms = (*report.timing)["median_ms"].get<double>();
  r.detail = *report.timing;
  r.detail["phase_ms"] = report.phase_ms;
  return r;
}

std::string SynthBaselines::device() { return impl_->executor->device_name(); }

std::string SynthBaselines::describe() const {
  const env::EvalOptions& o = impl_->options;
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "reference check, then warm-up %.0f ms, %d-%d samples to RSE %.2g or %.0f ms of samples, %d input "
                "sets",
                o.warmup_ms, o.min_samples, o.max_samples, o.target_rse, o.max_time_ms, o.timing_input_sets);
  return buf;
}

std::string add_compile_baselines(const fs::path& out, const CompileBaselineOptions& o) {
  const fs::path results = out / "compile_baselines.jsonl";
  const fs::path summary = out / "compile_baselines.json";
  const fs::path log = out / "compile_baselines.log";
  const int procs = o.workers > 0 ? o.workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const fs::path python = find_on_path(o.python);
  if (python.empty()) {
    if (o.required) throw SystemError("torch.compile baselines: the interpreter " + o.python + " was not found");
    return "the compile-baseline script cannot run: " + o.python + " not found";
  }
  std::vector<std::string> argv = {python.string(), o.script.string(),
                                   "--tasks",       (out / "tasks.jsonl").string(),
                                   "--pydir",       (out / "kernelbench").string(),
                                   "--out",         results.string(),
                                   "--summary",     summary.string(),
                                   "--device",      o.backend,
                                   "--workers",     std::to_string(procs),
                                   "--limit",       std::to_string(o.sample)};
  if (o.time_limit_s > 0) argv.insert(argv.end(), {"--time-limit", std::to_string(o.time_limit_s)});
  ProcessOptions po;
  // The script keeps its own --time-limit; with none it runs as long as the
  // sample takes, as the dataset run that calls it does.
  po.timeout_s = std::numeric_limits<double>::infinity();
  po.output_file = log;
  const ProcessResult run = run_process(argv, po);
  if (!run.ok()) {
    if (o.required) throw SystemError("torch.compile baselines failed; see " + log.string());
    return "the compile-baseline script failed (see " + log.string() + ")";
  }
  const Document s = Document::from_file(summary);
  if (!s.root.value("available", false)) {
    const std::string why = s.root.value("reason", std::string("unknown"));
    if (o.required) throw SystemError("torch.compile is not available: " + why);
    return "unavailable: " + why;
  }
  std::map<std::string, json> by_id;
  if (fs::exists(results)) {
    JsonlReadOptions ro;
    ro.allow_torn_tail = true;
    for_each_jsonl_line(
        results, [&](const Document& d, size_t) { by_id[d.root.value("task_id", "")] = d.root; }, ro);
  }
  // Merge into tasks.jsonl: rewritten whole and renamed, never half-written.
  const fs::path tasks = out / "tasks.jsonl", tmp = out / "tasks.jsonl.compile.tmp";
  size_t merged = 0, failed = 0;
  {
    JsonlWriter w(tmp, JsonlWriter::Mode::kTruncate);
    for_each_jsonl_line(tasks, [&](const Document& d, size_t) {
      TaskSpec t = parse_task(d);
      auto it = by_id.find(t.id);
      if (it != by_id.end()) {
        const json& r = it->second;
        json record = {{"device", r.value("device", "")},
                       {"torch", r.value("torch", s.root.value("torch", std::string()))},
                       {"protocol", r.value("protocol", "")}};
        if (r.contains("compile_ms") && r["compile_ms"].is_number()) {
          if (!t.baselines) t.baselines = Baselines{};
          t.baselines->compile_ms = r["compile_ms"].get<double>();
          if (t.baselines->device.empty()) t.baselines->device = r.value("device", "");
          record["samples"] = r.value("samples", 0);
          record["compile_s"] = r.value("compile_s", 0.0);
          ++merged;
        } else {
          // A task torch.compile could not handle is recorded as such.
          record["error"] = r.value("error", std::string("no result"));
          ++failed;
        }
        t.meta["compile_baseline"] = record;
      }
      w.write(to_json(t));
    });
  }
  fs::rename(tmp, tasks);
  return std::to_string(merged) + " tasks merged into tasks.jsonl, " + std::to_string(failed) + " failed (torch " +
         s.root.value("torch", std::string()) + ", " + s.root.value("device", std::string()) + ")";
}

}  // namespace kforge::cli
