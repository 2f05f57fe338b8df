// kforge eval: one solution through the environment (reset + submit), as a
// policy's final answer would be judged.
#include <iostream>
#include <memory>

#include "commands.h"
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
};

int run_eval(const EvalArgs& a) {
  const env::EnvConfig config = a.env.load();
  const TaskSpec task = load_task(a.task);
  const Solution solution = load_solution(a.solution, config.default_mode);
  env::Env environment(config);
  environment.reset(task, 0);
  Action submit;
  submit.type = ActionType::kSubmit;
  submit.solution = solution;
  const StepResult step = environment.step(submit);
  const std::string backend = env::backend_name(config.backend);
  if (a.json_output) {
    std::cout << report_json(task, solution, backend, step).dump(2) << "\n";
  } else {
    std::cout << format_report(task, solution, backend, step);
  }
  if (summarize(step).system_error) {
    std::cerr << "kforge eval: the environment failed: "
              << step.info["error"].value("message", std::string("unknown error")) << "\n";
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
      "PyTorch, and score it (as a submit step of the environment). Exits 0 whenever it evaluated, whatever the "
      "verdict.");
  cmd->add_option("--task", args->task, "Task file (.json or .yaml)")->required();
  cmd->add_option("--solution", args->solution,
                  "Solution: a source file (mode from --mode or the backend) or a .json/.yaml solution document")
      ->required();
  args->env.add_to(*cmd, /*with_mode=*/true);
  cmd->add_flag("--json", args->json_output, "Print the result as JSON (observation, reward components, info)");
  cmd->callback([args, selected] { *selected = [args] { return run_eval(*args); }; });
}

}  // namespace kforge::cli
