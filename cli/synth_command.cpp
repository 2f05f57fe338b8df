// kforge synth: synthesize validated, deduplicated, uncontaminated tasks
// (data_synth/, docs/data-synthesis.md); kforge import-kernelbench: turn
// KernelBench problem files into tasks.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "commands.h"
#include "kforge/core/jsonl.h"
#include "kforge/core/number_text.h"
#include "kforge/core/op_registry.h"
#include "kforge/core/process.h"
#include "kforge/data_synth/exporters.h"
#include "kforge/data_synth/reach.h"
#include "kforge/data_synth/splits.h"
#include "kforge/data_synth/synthesizer.h"
#include "synth_baseline.h"
#include "synth_solutions.h"

namespace kforge::cli {
namespace {
namespace fs = std::filesystem;

struct SynthArgs {
  int64_t n = 100;
  std::string backend = "cpu";
  std::string out;
  uint64_t seed = 0;
  int workers = 0;
  std::vector<double> window_ms;
  double memory_cap_gb = 0;
  std::string signatures;
  std::string baselines = "judge";
  std::string compile_baselines = "auto";
  int64_t compile_sample = 0;
  double compile_time_s = 0;
  std::vector<double> headroom;
  std::string split;
  std::string solutions = "off";
  int64_t solutions_limit = 0;
  double solutions_time_s = 0;
  int64_t reach_sample = 0;
  bool quiet = false;
};

// SIGINT/SIGTERM: stop after the attempts in flight, keep what is committed,
// still write the reports. A second signal ends the process at once
// (SA_RESETHAND restores the default action).
std::atomic<bool> g_cancel{false};

extern "C" void on_synth_stop_signal(int) { g_cancel.store(true); }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_synth_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

std::string python_interpreter() {
  if (const char* p = std::getenv("KFORGE_PYTHON")) return p;
#ifdef KFORGE_PYTHON_DEFAULT
  return KFORGE_PYTHON_DEFAULT;
#else
  return "/usr/bin/python3";
#endif
}

// The plots need matplotlib, which the Python with torch.compile may lack
// (the GPU machine's venv): KFORGE_PLOT_PYTHON picks another interpreter.
std::string plot_interpreter() {
  if (const char* p = std::getenv("KFORGE_PLOT_PYTHON")) return p;
  return python_interpreter();
}

fs::path python_script(const std::string& name) {
  if (const char* d = std::getenv("KFORGE_SYNTH_PYTHON_DIR")) return fs::path(d) / name;
  return fs::path(KFORGE_SOURCE_DIR) / "data_synth" / "python" / name;
}

// The progress line: a bar on a terminal (redrawn in place), plain lines
// every few seconds otherwise (logs, CI).
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool quiet) : quiet_(quiet), tty_(::isatty(STDERR_FILENO) != 0) {}

  void operator()(const synth::SynthProgress& p) {
    if (quiet_) return;
    const bool last = p.done || p.cancelled;
    if (!tty_ && !last && p.elapsed_s - last_line_s_ < 5.0) return;
    last_line_s_ = p.elapsed_s;
    const int64_t made = p.accepted - p.resumed;
    const double rate_h = p.elapsed_s > 0 ? static_cast<double>(made) * 3600.0 / p.elapsed_s : 0.0;
    const double eta =
        made > 0 ? (static_cast<double>(p.target - p.accepted) * p.elapsed_s / static_cast<double>(made)) : NAN;
    std::ostringstream line;
    if (tty_) {
      const int width = 28;
      const int filled = p.target > 0 ? static_cast<int>(width * p.accepted / p.target) : width;
      line << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] ";
    } else {
      line << "synth: ";
    }
    line << p.accepted << "/" << p.target << " accepted";
    if (p.resumed > 0) line << " (" << p.resumed << " resumed)";
    line << ", " << p.rejected << " rejected, " << format_fixed(rate_h, 0) << " tasks/h, ETA "
         << (std::isnan(eta) ? std::string("?") : format_fixed(eta, 0) + " s");
    if (last || !tty_) {
      if (!p.rejections.empty()) {
        line << " [";
        bool first = true;
        for (const auto& [k, v] : p.rejections) {
          line << (first ? "" : ", ") << k << " " << v;
          first = false;
        }
        line << "]";
      }
    }
    if (p.cancelled) line << " (interrupted)";
    std::cerr << line.str() << (tty_ && !last ? "" : "\n") << std::flush;
  }

 private:
  bool quiet_;
  bool tty_;
  double last_line_s_ = -1e9;
};

// After the run: template solutions judged (--solutions on), the reach
// estimate (--reach-sample), the split (--split); each writes its file, which
// the card then reads. Returns what was done, for the summary line.
std::string add_dataset_extras(const SynthArgs& a, const synth::SynthConfig& config,
                               const std::optional<synth::SplitFractions>& split) {
  if (g_cancel.load()) return "";
  std::string done;
  if (a.solutions == "on") {
    SolutionOptions so;
    so.backend = a.backend;
    so.limit = a.solutions_limit;
    so.time_limit_s = a.solutions_time_s;
    const std::string note = add_template_solutions(a.out, so);
    if (!a.quiet) std::cerr << "kforge synth: solutions: " << note << "\n";
    done += "solutions; ";
  }
  std::vector<TaskSpec> tasks;
  if (a.reach_sample > 0 || split) {
    for_each_jsonl_line(fs::path(a.out) / "tasks.jsonl",
                        [&](const Document& d, size_t) { tasks.push_back(parse_task(d)); });
  }
  if (a.reach_sample > 0) {
    const synth::KernelBenchSignatures signatures = synth::KernelBenchSignatures::load(
        config.signatures.empty() ? synth::default_signature_path() : config.signatures);
    const synth::DeviceProfile& profile = a.backend == "cuda" ? synth::cuda_profile() : synth::cpu_profile();
    synth::ReachEstimate r = synth::estimate_reach(config.seed, a.reach_sample, config.compose, config.shapes, profile,
                                                   signatures, config.workers);
    const Document rej = Document::from_file(fs::path(a.out) / "rejections.json");
    r.filter_pass_share = synth::filter_pass_share(static_cast<int64_t>(tasks.size()), rej.root["by_reason"]);
    r.estimate = r.chao1 * r.filter_pass_share;
    std::ofstream(fs::path(a.out) / "reach.json") << r.to_json().dump(2) << "\n";
    if (!a.quiet) {
      std::cerr << "kforge synth: reach: " << r.distinct << " distinct graphs in " << r.passed << " of " << r.samples
                << " samples, Chao1 " << format_fixed(r.chao1, 0) << ", x filter pass share "
                << format_fixed(r.filter_pass_share, 2) << " = " << format_fixed(r.estimate, 0)
                << " valid tasks (target " << format_fixed(synth::kReachTarget, 0) << ")\n";
    }
    done += "reach; ";
  }
  if (split) {
    const json report = synth::write_split(a.out, tasks, *split);
    if (!a.quiet) {
      std::cerr << "kforge synth: split: " << report["tasks"].dump() << " tasks, " << report["families"].dump()
                << " families; test cores in train: " << report["test_cores_in_train"] << "\n";
    }
    done += "split; ";
  }
  return done;
}

// The synthesizer's configuration from the command line, each option checked.
synth::SynthConfig synth_config(const SynthArgs& a) {
  synth::SynthConfig config;
  config.n = a.n;
  config.seed = a.seed;
  config.backend = a.backend;
  config.workers = a.workers;
  config.shapes.window = synth::default_window(a.backend);
  if (!a.window_ms.empty()) {
    if (a.window_ms.size() != 2 || !(a.window_ms[0] > 0) || !(a.window_ms[1] > a.window_ms[0])) {
      throw InputError("--window-ms: expected two numbers LO,HI with 0 < LO < HI (e.g. 0.05,20)");
    }
    config.shapes.window = {a.window_ms[0], a.window_ms[1]};
  }
  if (a.memory_cap_gb > 0) config.shapes.memory_cap_bytes = a.memory_cap_gb * (1ull << 30);
  if (!a.signatures.empty()) config.signatures = a.signatures;
  if (!a.headroom.empty()) {
    if (a.headroom.size() != 2 || !(a.headroom[0] >= 0) || !(a.headroom[1] > a.headroom[0])) {
      throw InputError(
          "--headroom: expected two numbers LO,HI with 0 <= LO < HI (e.g. 2,20: predicted eager time over "
          "the roofline bound)");
    }
    config.headroom_range = a.headroom;
  }
  return config;
}

// Exports the dataset. With torch.compile baselines the KernelBench files
// come first, since the baselines compile them, and the card and reports
// once those are merged. Leaves `eo` exporting everything; `compile_note`
// says what the baselines did.
synth::ExportSummary export_with_compile_baselines(const SynthArgs& a, const synth::SynthConfig& config,
                                                   synth::ExportOptions* eo, std::string* compile_note) {
  const bool compile = a.compile_baselines != "off" && !g_cancel.load();
  eo->python_files_only = compile;
  synth::ExportSummary summary = synth::export_dataset(a.out, *eo);
  *compile_note = "off";
  if (!compile) return summary;
  CompileBaselineOptions co;
  co.python = python_interpreter();
  co.script = python_script("compile_baselines.py");
  co.backend = a.backend;
  co.workers = config.workers;
  co.sample = a.compile_sample;
  co.time_limit_s = a.compile_time_s;
  co.required = a.compile_baselines == "on";
  eo->python_files_only = false;
  try {
    *compile_note = add_compile_baselines(a.out, co);
  } catch (const std::exception&) {
    synth::export_dataset(a.out, *eo);  // the card and reports all the same
    throw;
  }
  if (!a.quiet) std::cerr << "kforge synth: torch.compile baselines: " << *compile_note << "\n";
  return synth::export_dataset(a.out, *eo);
}

// The JSON line on stdout that sums up the run.
json synth_summary_line(const SynthArgs& a, const synth::SynthProgress& result, const synth::ExportSummary& summary,
                        const std::string& eager_baselines, const std::string& compile_note,
                        const std::string& extras) {
  const double made = static_cast<double>(result.accepted - result.resumed);
  return {{"out", a.out},
          {"tasks", summary.tasks},
          {"target", a.n},
          {"complete", result.done},
          {"interrupted", result.cancelled},
          {"new_tasks", result.accepted - result.resumed},
          {"attempts", result.attempts},
          {"rejected", result.rejected},
          {"rejections", result.rejections},
          {"judge_retries", result.judge_retries},
          {"elapsed_s", result.elapsed_s},
          {"tasks_per_hour", result.elapsed_s > 0 ? made * 3600.0 / result.elapsed_s : 0.0},
          {"eager_baselines", eager_baselines},
          {"compile_baselines", compile_note},
          {"extras", extras},
          {"plots", summary.plots}};
}

int run_synth(const SynthArgs& a) {
  if (a.out.empty()) throw InputError("--out: a directory for the synthesized tasks is required");
  synth::SynthConfig config = synth_config(a);
  // Checked before the run, not after it.
  const std::optional<synth::SplitFractions> split =
      a.split.empty() ? std::nullopt : std::optional<synth::SplitFractions>(synth::parse_split(a.split));

  std::unique_ptr<SynthBaselines> judge;
  synth::BaselineFn baseline;
  if (a.baselines == "judge") {
    judge = std::make_unique<SynthBaselines>(a.backend);
    baseline = [&judge](const TaskSpec& t) { return judge->measure(t); };
  }
  ProgressPrinter printer(a.quiet);
  synth::ProgressFn progress = [&printer](const synth::SynthProgress& p) { printer(p); };
  if (!a.quiet) {
    std::cerr << "kforge synth: " << a.n << " tasks, seed " << a.seed << ", " << a.backend << " backend, window ["
              << config.shapes.window.lo_ms << ", " << config.shapes.window.hi_ms << "] ms, out " << a.out
              << (judge ? ", eager baselines from the judge (" + judge->describe() + ")" : ", no baselines") << "\n";
  }
  config.cancel = &g_cancel;
  install_stop_handlers();
  const synth::SynthProgress result = synthesize(config, a.out, baseline, progress);

  synth::ExportOptions eo;
  eo.python = plot_interpreter();
  eo.plot_script = python_script("dataset_card_plots.py");
  eo.device = judge ? judge->device() : a.backend;
  eo.elapsed_s = result.elapsed_s;
  std::string compile_note;
  synth::ExportSummary summary = export_with_compile_baselines(a, config, &eo, &compile_note);
  const std::string extras = add_dataset_extras(a, config, split);
  if (!extras.empty()) summary = synth::export_dataset(a.out, eo);
  std::cout << synth_summary_line(a, result, summary, judge ? judge->describe() : "none", compile_note, extras).dump()
            << std::endl;
  if (result.cancelled) {
    if (!a.quiet) {
      std::cerr << "kforge synth: stopped at " << result.accepted << " of " << a.n
                << " tasks; rerun the same command to continue\n";
    }
    return kExitIncomplete;
  }
  return kExitOk;
}

struct ImportArgs {
  std::vector<std::string> paths;
  std::string out;
  std::string report;
};

// The Python importer proposes tasks; each is then checked here exactly as
// `kforge task check` does (the op registry's shape inference of every
// variant), and a task that fails moves to the report with the reason.
int run_import(const ImportArgs& a) {
  const fs::path raw = a.out + ".unchecked";
  const std::string report_path = a.report.empty() ? a.out + ".report.json" : a.report;
  const fs::path python = find_on_path(python_interpreter());
  if (python.empty()) {
    throw InputError("the KernelBench importer needs Python: " + python_interpreter() +
                     " was not found (set KFORGE_PYTHON to an interpreter)");
  }
  std::vector<std::string> argv = {python.string(), python_script("kernelbench_import.py").string()};
  argv.insert(argv.end(), a.paths.begin(), a.paths.end());
  argv.insert(argv.end(), {"--out", raw.string(), "--report", report_path});
  ProcessOptions po;
  po.timeout_s = std::numeric_limits<double>::infinity();  // as long as the import takes, as before
  po.separate_stderr = true;  // its summary on stdout is not shown; stderr says why it failed
  const ProcessResult r = run_process(argv, po);
  if (!r.ok()) {
    throw SystemError("the KernelBench importer failed (" + python.string() + " " + argv[1] + ", exit " +
                      std::to_string(r.exit_code) + "): " + last_lines(r.error_output, 5));
  }
  Document report = Document::from_file(report_path);
  JsonlWriter writer(a.out, JsonlWriter::Mode::kTruncate);
  size_t ok = 0, rejected = 0;
  for_each_jsonl_line(raw, [&](const Document& doc, size_t) {
    std::string problem;
    try {
      const TaskSpec task = parse_task(doc);
      infer_graph(task);
      for (size_t v = 0; v < task.shape_variants.size(); ++v) infer_graph(task.with_variant(v));
      writer.write(to_json(task));
      ++ok;
      return;
    } catch (const InputError& e) {
      problem = e.what();
    }
    ++rejected;
    for (auto& p : report.root["problems"]) {
      if (p.value("task_id", "") == doc.root.value("id", "")) {
        p["imported"] = false;
        p["reason"] = "task check: " + problem;
      }
    }
  });
  fs::remove(raw);
  report.root["imported"] = ok;
  report.root["not_imported"] = report.root.value("files", size_t{0}) - ok;
  std::ofstream(report_path) << report.root.dump(1) << "\n";
  std::cout << json({{"out", a.out},
                     {"report", report_path},
                     {"files", report.root["files"]},
                     {"imported", ok},
                     {"failed_task_check", rejected}})
                   .dump()
            << std::endl;
  for (const auto& p : report.root["problems"]) {
    if (!p.value("imported", false)) {
      std::cerr << "not imported: " << p.value("task_id", "?") << ": " << p.value("reason", "?") << "\n";
    }
  }
  return kExitOk;
}

}  // namespace

void add_synth_commands(CLI::App& app, CommandFn* selected) {
  auto args = std::make_shared<SynthArgs>();
  CLI::App* cmd = app.add_subcommand(
      "synth",
      "Synthesize tasks by composing ops (docs/data-synthesis.md): writes DIR/tasks.jsonl, DIR/kernelbench/*.py, "
      "DIR/DATASET_CARD.md, rejection and contamination reports. Rerun the same command to resume.");
  cmd->add_option("--n", args->n, "Tasks to produce")->check(CLI::Range(int64_t{1}, int64_t{10000000}))->required();
  cmd->add_option("--backend", args->backend, "Device of the shape search, filters and baselines")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--out", args->out, "Output directory (created; an existing run there is resumed)")->required();
  cmd->add_option("--seed", args->seed, "Seed: the same seed and N give the same tasks.jsonl")->capture_default_str();
  cmd->add_option("--workers", args->workers, "Worker threads (default: every core)")->check(CLI::Range(0, 4096));
  cmd->add_option("--window-ms", args->window_ms,
                  "Runtime window LO,HI of the eager reference in ms (default 0.05,20 on cuda, 0.02,20 on cpu)")
      ->delimiter(',');
  cmd->add_option("--memory-cap-gb", args->memory_cap_gb, "Cap on one call's tensors (default 2 GiB)")
      ->check(CLI::Range(0.001, 1024.0));
  cmd->add_option("--signatures", args->signatures,
                  "KernelBench signature file (default: data_synth/signatures/kernelbench_signatures.json)");
  cmd->add_option("--baselines", args->baselines, "Eager baselines: judge (time the reference) or none")
      ->check(CLI::IsMember({"judge", "none"}))
      ->capture_default_str();
  cmd->add_option("--compile-baselines", args->compile_baselines,
                  "torch.compile baselines in parallel Python processes: auto (where torch.compile works), on "
                  "(fail if it does not), off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_option("--compile-sample", args->compile_sample,
                  "torch.compile baselines for at most this many tasks still without one (default 0: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  cmd->add_option("--compile-time-s", args->compile_time_s,
                  "Abandon torch.compile work still running after this many seconds (default 0: no limit); "
                  "finished results are merged")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--headroom", args->headroom,
                  "Keep tasks whose predicted headroom (cost-model eager time over the roofline bound) is in LO,HI: "
                  "a curriculum, e.g. 1.5,10 for easy fusions, 30,1000 for GEMM chains")
      ->delimiter(',');
  cmd->add_option("--split", args->split,
                  "Write split/{train,validation,test}.jsonl with whole op-graph families in one split, e.g. "
                  "0.8,0.1,0.1")
      ->type_name("TRAIN,VAL,TEST");
  cmd->add_option("--solutions", args->solutions,
                  "on: the template generator's naive kernel for every task it covers, judged (cpp on cpu, cuda "
                  "on cuda); verified ones go to solutions/")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--solutions-limit", args->solutions_limit,
                  "With --solutions on: judge at most this many covered tasks not judged yet (0: all); a rerun "
                  "judges the next ones")
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  cmd->add_option("--solutions-time-s", args->solutions_time_s,
                  "With --solutions on: start no solution after this many seconds (default 0: no limit); those "
                  "judged are kept and indexed, the rest stay 'not judged' and a rerun judges them")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--reach-sample", args->reach_sample,
                  "Estimate how many distinct valid tasks the rules can produce from this many drawn graphs "
                  "(reach.json; 0: off)")
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  cmd->add_flag("--quiet", args->quiet, "No progress output");
  cmd->callback([args, selected] { *selected = [args] { return run_synth(*args); }; });

  auto imp = std::make_shared<ImportArgs>();
  CLI::App* ic = app.add_subcommand(
      "import-kernelbench",
      "Import KernelBench-format problem files (class Model, get_inputs, get_init_inputs) as tasks; problems with "
      "ops outside the vocabulary are listed in the report with the reason");
  ic->add_option("dir", imp->paths, "Problem files or directories of them")->required();
  ic->add_option("--out", imp->out, "Tasks JSONL to write")->required();
  ic->add_option("--report", imp->report, "Report JSON (default: OUT.report.json)");
  ic->callback([imp, selected] { *selected = [imp] { return run_import(*imp); }; });
}

}  // namespace kforge::cli
