// kforge eval: one solution through the environment (reset + submit), as a
// policy's final answer would be judged; or many (--solutions, eval_solutions.h).
#include <iostream>
#include <memory>

#include "commands.h"
#include "eval_solutions.h"
#include "kforge/core/action.h"
#include "kforge/env/env.h"
#include "report.h"

namespace kforge::cli {
namespace {

struct EvalArgs {
  std::string task;
  std::string solution;
  bool json_output = false;
  EnvOptions env;
  BatchArgs batch;
  std::string solutions;
  std::string results;
};

int run_eval(const EvalArgs& a) {
  if (!a.solutions.empty()) {
    if (!a.solution.empty()) throw InputError("give either --solution (one) or --solutions (many), not both");
    if (a.results.empty()) {
      throw InputError(
          "--solutions needs --results FILE.jsonl: where each pair's result is appended (a rerun "
          "skips the pairs already there)");
    }
    BatchArgs b = a.batch;
    b.solutions = a.solutions;
    b.task = a.task;
    b.results = a.results;
    b.json_output = a.json_output;
    return run_batch(b, a.env.load());
  }
  if (a.task.empty() || a.solution.empty()) {
    throw InputError("kforge eval needs --task and --solution (one solution), or --solutions (many)");
  }
  env::EnvConfig config = a.env.load();
  // One evaluation needs one judge: not the whole placement.
  config.placement.lanes_per_device = 1;
  config.placement.cpu_slots = 1;
  if (!config.placement.all_devices) config.placement.devices.resize(1);
  const TaskSpec task = load_task(a.task);
  const Solution solution = load_solution(a.solution, config.default_mode);
  env::Env environment(config);
  environment.reset(task, 0);
  Action submit;
  submit.type = ActionType::kSubmit;
  submit.solution = solution;
  const env::StepResult step = environment.step(submit);
  const std::string backend = env::backend_name(config.backend);
  if (a.json_output) {
    std::cout << report_json(task, solution, backend, step).dump(2) << "\n";
  } else {
    std::cout << format_report(task, solution, backend, step);
  }
  if (summarize(step).system_error) {
    std::cerr << "kforge eval: the environment failed: "
              << step.info.error.value_or(env::StepError{env::StepErrorKind::kSystem, "unknown error"}).message << "\n";
    return kExitSystem;
  }
  return kExitOk;
}

}  // namespace

void add_eval_command(CLI::App& app, CommandFn* selected) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Evaluate one solution of a task: compile, verify on every seed and shape variant, time against eager "
      "PyTorch, and score it (as a submit step of the environment). With --solutions, evaluate many through every "
      "configured device, with progress, a summary table and JSONL results (resumable). Exits 0 whenever "
      "everything was evaluated, whatever the verdicts; 1 when something could not be.");
  cmd->add_option("--task", args->task,
                  "Task file (.json or .yaml); with --solutions, the task of a folder of solutions");
  cmd->add_option("--solution", args->solution,
                  "Solution: a source file (mode from --mode or the backend) or a .json/.yaml solution document");
  cmd->add_option("--solutions", args->solutions,
                  "Many solutions: a folder (with --task), a list file of \"TASK SOLUTION\" lines (\"SOLUTION\" with "
                  "--task), or a .jsonl file of {\"task\": path|object, \"solution\": path|object, \"id\"?}");
  cmd->add_option("--results", args->results,
                  "With --solutions: JSONL file each result is appended to; pairs already in it are skipped");
  cmd->add_option("--concurrency", args->batch.concurrency,
                  "With --solutions: episodes in flight (default: placement.episodes_per_device x devices)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--time-limit-s", args->batch.time_limit_s,
                  "With --solutions: start no pair after this many seconds (default 0: no limit); pairs in flight "
                  "finish, those not started get no row (exit 1), and a rerun evaluates them")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_flag("--progress-lines", args->batch.progress_lines,
                "With --solutions: one progress line per pair even on a terminal");
  args->env.add_to(*cmd, /*with_mode=*/true);
  cmd->add_flag("--json", args->json_output,
                "Print the result as JSON (observation, reward components, info); with --solutions, the summary");
  cmd->callback([args, selected] { *selected = [args] { return run_eval(*args); }; });
}

}  // namespace kforge::cli
