// kforge task render|check|prompt: look at a task the way the environment does.
#include <iostream>
#include <memory>

#include "commands.h"
#include "kforge/core/kernelbench_render.h"
#include "kforge/core/op_registry.h"
#include "kforge/env/env.h"
#include "kforge/env/prompt.h"

namespace kforge::cli {
namespace {

struct TaskArgs {
  std::string task;
  bool json_output = false;
  EnvOptions env;
};

int run_render(const TaskArgs& a) {
  std::cout << render_kernelbench(load_task(a.task));
  return kExitOk;
}

int run_check(const TaskArgs& a) {
  const TaskSpec task = load_task(a.task);
  json table;
  try {
    table = env::abi_table(task);  // type-checks every variant within the task limits
  } catch (const InputError& e) {
    throw InputError(a.task + ": " + e.what());  // the graph's errors name the task, not the file
  }
  if (a.json_output) {
    std::cout << json({{"task_id", task.id}, {"valid", true}, {"abi", table}}).dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "ok: " << task.id << ": " << task.inputs.size() << " input(s), " << task.params.size() << " param(s), "
            << task.nodes.size() << " node(s), " << task.shape_variants.size() << " shape variant(s)\n\n"
            << env::render_abi_table(table);
  return kExitOk;
}

int run_prompt(const TaskArgs& a) {
  const TaskSpec task = load_task(a.task);
  env::Env environment(a.env.load());
  const env::ResetResult r = environment.reset(task, 0);
  if (a.json_output) {
    std::cout << r.observation.data.dump(2) << "\n";
  } else {
    for (const auto& m : r.observation.data["messages"]) {
      std::cout << "=== " << m["role"].get<std::string>() << "\n" << m["content"].get<std::string>() << "\n";
    }
  }
  return kExitOk;
}

}  // namespace

void add_task_command(CLI::App& app, CommandFn* selected) {
  CLI::App* task = app.add_subcommand("task", "Inspect a task file: render, check, or show the prompt");
  task->require_subcommand(1);

  auto render_args = std::make_shared<TaskArgs>();
  CLI::App* render = task->add_subcommand("render",
                                          "Print the task as KernelBench-format PyTorch (class Model, "
                                          "get_inputs, get_init_inputs)");
  render->add_option("task", render_args->task, "Task file (.json or .yaml)")->required();
  render->callback([render_args, selected] { *selected = [render_args] { return run_render(*render_args); }; });

  auto check_args = std::make_shared<TaskArgs>();
  CLI::App* check = task->add_subcommand(
      "check",
      "Validate a task (structure, ops, attributes, shapes of every variant) and print the kernel's "
      "inputs and inferred outputs");
  check->add_option("task", check_args->task, "Task file (.json or .yaml)")->required();
  check->add_flag("--json", check_args->json_output, "Print the ABI table as JSON");
  check->callback([check_args, selected] { *selected = [check_args] { return run_check(*check_args); }; });

  auto prompt_args = std::make_shared<TaskArgs>();
  CLI::App* prompt = task->add_subcommand(
      "prompt", "Print the first observation a policy gets for the task (system and user messages)");
  prompt->add_option("task", prompt_args->task, "Task file (.json or .yaml)")->required();
  prompt->add_flag("--json", prompt_args->json_output, "Print the observation's data (messages, tools, ABI) as JSON");
  prompt_args->env.add_to(*prompt, /*with_mode=*/true);
  prompt->callback([prompt_args, selected] { *selected = [prompt_args] { return run_prompt(*prompt_args); }; });
}

}  // namespace kforge::cli
