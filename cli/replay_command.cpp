// kforge replay FILE...: summarize recorded trajectories, find the techniques
// of their solutions, optionally re-run their submits on this machine, and
// write an HTML report with plots (rollout/include/kforge/rollout/replay/,
// docs/replay.md).
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "kforge/core/error.h"
#include "kforge/rollout/replay/replay.h"
#include "kforge/rollout/replay/replay_report.h"

namespace kforge::cli {
namespace {

namespace fs = std::filesystem;
using rollout::replay::ReplayOptions;

struct ReplayArgs {
  std::vector<std::string> files;
  std::vector<std::string> tasks;
  std::string out;
  bool no_report = false;
  bool json_output = false;
  bool reevaluate = false;
  int repeats = 3;
  double tolerance = 0.05;
  int max_submits = 0;
  int parallel = 4;
  bool no_sass = false;
  bool no_techniques = false;
  EnvOptions env;
};

int run_replay(const ReplayArgs& a) {
  ReplayOptions options;
  for (const auto& t : a.tasks) options.task_sets.emplace_back(t);
  options.techniques = !a.no_techniques;
  options.technique.read_sass = !a.no_sass;
  options.reevaluate = a.reevaluate;
  options.reeval.repeats = a.repeats;
  options.reeval.rel_tolerance = a.tolerance;
  options.reeval.max_submits = static_cast<size_t>(a.max_submits);
  options.reeval.parallel = a.parallel;
  options.log = [](const std::string& line) { std::cerr << "replay: " << line << "\n"; };
  if (a.reevaluate) {
    options.env = a.env.load();
    options.technique.arch = options.env->arch;
  }
  std::vector<fs::path> files(a.files.begin(), a.files.end());
  const rollout::replay::ReplayAnalysis analysis = rollout::replay::analyze_replay(files, options);
  if (analysis.recorded.episodes.empty()) {
    std::string why;
    for (const auto& p : analysis.recorded.problems) {
      why += "\n  " + p.file + (p.line ? ":" + std::to_string(p.line) : "") + ": " + p.message;
    }
    throw InputError("replay: no trajectory could be read" +
                     (why.empty() ? std::string(" (the files are empty)") : why));
  }
  if (a.json_output) {
    std::cout << rollout::replay::to_json(analysis).dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << rollout::replay::format_replay(analysis);
  }
  if (!a.no_report) {
    const fs::path dir = !a.out.empty() ? fs::path(a.out) : fs::path(a.files.front()).parent_path() / "replay-report";
    const auto report = rollout::replay::write_replay_report(dir, analysis);
    if (!report.plot_error.empty()) std::cerr << "replay: no plots: " << report.plot_error << "\n";
    // On stderr with --json, so that stdout stays one JSON document.
    (a.json_output ? std::cerr : std::cout) << "report: " << fs::absolute(report.html).string() << "\n";
  }
  bool incomplete = !analysis.recorded.problems.empty();
  if (analysis.reevaluation) {
    for (const auto& row : analysis.reevaluation->rows) {
      incomplete = incomplete || row.verdict == rollout::replay::ReevalVerdict::kNotReevaluated;
    }
  }
  return incomplete ? kExitIncomplete : kExitOk;
}

}  // namespace

void add_replay_command(CLI::App& app, CommandFn* selected) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "Summarize recorded trajectories (JSONL of the rollout workers or of `kforge receive`): per task and policy "
      "version, episodes, turns, success, reward and speedup distributions, failure causes; the optimization "
      "techniques of each final solution (source, and SASS where cuobjdump exists); with --reevaluate, re-run every "
      "recorded submit here and say whether its reward reproduces. Writes an HTML report with plots. Exits 1 when "
      "some lines could not be read or some submits could not be re-run.");
  cmd->add_option("files", args->files, "Trajectory files (.jsonl) or folders holding them")->required();
  cmd->add_option("--tasks", args->tasks,
                  "Task set(s) the trajectories' tasks come from (.jsonl, task file or folder); needed to re-run "
                  "submits of trajectories that do not carry their task");
  cmd->add_option("--out", args->out, "Report folder (default: replay-report next to the first file)");
  cmd->add_flag("--no-report", args->no_report, "Print the summary only; write no report folder");
  cmd->add_flag("--json", args->json_output, "Print the whole analysis as JSON instead of tables");
  cmd->add_flag("--reevaluate", args->reevaluate,
                "Re-run every recorded submit through the environment (same task, seed and solution) and compare "
                "rewards; use the --config the trajectories were recorded with");
  cmd->add_option("--repeats", args->repeats, "Runs per submit when re-evaluating (default 3)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--tolerance", args->tolerance,
                  "Relative tolerance on the reward when re-evaluating (default 0.05, at least 0.01 absolute)")
      ->check(CLI::Range(0.0, 10.0));
  cmd->add_option("--max-submits", args->max_submits, "Re-run at most this many submits (default: all)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--parallel", args->parallel, "Episodes in flight while re-evaluating (default 4)")
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--no-sass", args->no_sass, "Do not compile CUDA solutions to read their SASS (source only)");
  cmd->add_flag("--no-techniques", args->no_techniques, "Skip the technique analysis");
  args->env.add_to(*cmd, /*with_mode=*/false);
  cmd->callback([args, selected] { *selected = [args] { return run_replay(*args); }; });
}

}  // namespace kforge::cli
