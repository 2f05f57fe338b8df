#include "synth_baseline.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "kforge/core/jsonl.h"

#if __has_include("kforge/env/reference_probe.h")
#include "kforge/env/executor.h"
#include "kforge/env/reference_probe.h"
#define KFORGE_HAVE_REFERENCE_PROBE 1
#endif

namespace kforge::cli {
namespace fs = std::filesystem;

#ifdef KFORGE_HAVE_REFERENCE_PROBE
namespace {

// Baseline timing keeps the judge's stopping rule (samples until the median's
// relative standard error is under target_rse, or the time cap) with a looser
// target and a shorter cap than a candidate's evaluation, so that a baseline
// costs ~0.1-0.3 s of judge time: the throughput target is 6,000 tasks per
// GPU-hour. docs/data-synthesis.md lists them.
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
  env::ReferenceRequest request;
  request.task = task;
  request.check = false;  // the filters ran already, in-process
  request.time = true;
  request.options = impl_->options;
  const env::ReferenceReport report = impl_->executor->submit_reference(std::move(request)).get();
  synth::BaselineResult r;
  r.device = report.device;
  if (!report.ok() || !report.timing || !report.timing->contains("median_ms")) {
    r.error = report.problem.empty() ? "the judge returned no timing" : report.problem;
    return r;
  }
  r.eager_ms = (*report.timing)["median_ms"].get<double>();
  r.detail = *report.timing;
  return r;
}

std::string SynthBaselines::device() { return impl_->executor->device_name(); }

std::string SynthBaselines::describe() const {
  const env::EvalOptions& o = impl_->options;
  return "warm-up " + std::to_string(static_cast<int>(o.warmup_ms)) + " ms, " + std::to_string(o.min_samples) +
         "+ samples to RSE " + std::to_string(o.target_rse).substr(0, 4) + " or " +
         std::to_string(static_cast<int>(o.max_time_ms)) + " ms";
}
#else
// Built before the judge's reference request existed: no eager baselines,
// recorded as such (never invented).
struct SynthBaselines::Impl {};
SynthBaselines::SynthBaselines(const std::string&) : impl_(std::make_unique<Impl>()) {}
SynthBaselines::~SynthBaselines() = default;
synth::BaselineResult SynthBaselines::measure(const TaskSpec&) {
  synth::BaselineResult r;
  r.error = "this build has no judge reference request (env/reference_probe.h)";
  return r;
}
std::string SynthBaselines::device() { return ""; }
std::string SynthBaselines::describe() const { return "unavailable in this build"; }
#endif

std::string add_compile_baselines(const fs::path& out, const std::string& python, const fs::path& script,
                                  const std::string& backend, int workers, bool required) {
  const fs::path results = out / "compile_baselines.jsonl";
  const fs::path summary = out / "compile_baselines.json";
  const int procs = workers > 0 ? workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string cmd = "'" + python + "' '" + script.string() + "' --tasks '" + (out / "tasks.jsonl").string() +
                          "' --pydir '" + (out / "kernelbench").string() + "' --out '" + results.string() +
                          "' --summary '" + summary.string() + "' --device " + backend + " --workers " +
                          std::to_string(procs) + " > '" + (out / "compile_baselines.log").string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  if (status != 0) {
    if (required) throw SystemError("torch.compile baselines failed; see " + (out / "compile_baselines.log").string());
    return "the compile-baseline script failed (see compile_baselines.log)";
  }
  const Document s = Document::from_file(summary);
  if (!s.root.value("available", false)) {
    const std::string why = s.root.value("reason", std::string("unknown"));
    if (required) throw SystemError("torch.compile is not available: " + why);
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
  size_t merged = 0;
  {
    JsonlWriter w(tmp, JsonlWriter::Mode::kTruncate);
    for_each_jsonl_line(tasks, [&](const Document& d, size_t) {
      TaskSpec t = parse_task(d);
      auto it = by_id.find(t.id);
      if (it != by_id.end() && it->second.contains("compile_ms")) {
        if (!t.baselines) t.baselines = Baselines{};
        t.baselines->compile_ms = it->second["compile_ms"].get<double>();
        if (t.baselines->device.empty()) t.baselines->device = it->second.value("device", "");
        t.meta["compile_baseline"] = {{"device", it->second.value("device", "")},
                                      {"torch", it->second.value("torch", "")},
                                      {"protocol", it->second.value("protocol", "")}};
        ++merged;
      }
      w.write(to_json(t));
    });
  }
  fs::rename(tmp, tasks);
  return std::to_string(merged) + " tasks (" + s.root.value("torch", std::string()) + ", " +
         s.root.value("device", std::string()) + ")";
}

}  // namespace kforge::cli
