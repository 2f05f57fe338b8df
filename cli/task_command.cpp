// kforge task render|check|baseline|prompt|template: look at a task the way
// the environment does, or at the template policy's kernel templates for it.
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "commands.h"
#include "kforge/core/kernelbench_render.h"
#include "kforge/core/op_registry.h"
#include "kforge/env/env.h"
#include "kforge/env/executor.h"
#include "kforge/env/prompt.h"
#include "kforge/env/reference_probe.h"
#include "kforge/rollout/policy/template_policy.h"

namespace kforge::cli {
namespace {

struct TaskArgs {
  std::string task;
  bool json_output = false;
  bool no_reference = false;
  EnvOptions env;
  std::string mode = "cpp";
  std::vector<std::string> variants;
};

int run_render(const TaskArgs& a) {
  std::cout << render_kernelbench(load_task(a.task));
  return kExitOk;
}

// Runs the task's reference on a judge of the configured backend.
env::ReferenceReport probe(const TaskArgs& a, const TaskSpec& task, bool check, bool time) {
  const env::EnvConfig config = a.env.load();
  std::unique_ptr<env::Executor> executor = env::make_executor(env::executor_config(config));
  env::ReferenceRequest request;
  request.task = task;
  request.check = check;
  request.time = time;
  request.options = config.eval;
  return executor->submit_reference(std::move(request)).get();
}

// Exit code and message for a report that is not ok; kExitOk when it is.
int report_problem(const std::string& file, const TaskSpec& task, const env::ReferenceReport& r) {
  if (r.ok()) return kExitOk;
  if (r.invalid()) {
    std::fprintf(stderr, "kforge: error: %s: task '%s' cannot be judged: %s\n", file.c_str(), task.id.c_str(),
                 r.problem.c_str());
    return kExitBadInput;
  }
  std::fprintf(stderr, "kforge: %s\n", r.problem.c_str());
  return kExitSystem;
}

int run_check(const TaskArgs& a) {
  const TaskSpec task = load_task(a.task);
  json table;
  try {
    table = env::abi_table(task);  // type-checks every variant within the task limits
  } catch (const InputError& e) {
    throw InputError(a.task + ": " + e.what());  // the graph's errors name the task, not the file
  }
  std::optional<env::ReferenceReport> reference;
  if (!a.no_reference) reference = probe(a, task, /*check=*/true, /*time=*/false);
  const int code = reference ? report_problem(a.task, task, *reference) : kExitOk;
  if (a.json_output) {
    json out = {{"task_id", task.id}, {"valid", code == kExitOk}, {"abi", table}};
    out["reference"] = reference ? env::to_json(*reference) : json(nullptr);
    std::cout << out.dump(2) << "\n";
    return code;
  }
  if (code != kExitOk) return code;
  std::cout << "ok: " << task.id << ": " << task.inputs.size() << " input(s), " << task.params.size() << " param(s), "
            << task.nodes.size() << " node(s), " << task.shape_variants.size() << " shape variant(s)";
  if (reference) {
    std::cout << "; reference checked on " << reference->device << " (" << reference->nodes.size()
              << " shape case(s): every output finite and varying)";
  } else {
    std::cout << "; reference not run (--no-reference)";
  }
  std::cout << "\n\n" << env::render_abi_table(table);
  return kExitOk;
}

int run_baseline(const TaskArgs& a) {
  const TaskSpec task = load_task(a.task);
  env::abi_table(task);  // type-checks every variant (InputError otherwise)
  const env::ReferenceReport r = probe(a, task, /*check=*/true, /*time=*/true);
  if (a.json_output) {
    std::cout << json({{"task_id", task.id}, {"valid", r.ok()}, {"reference", env::to_json(r)}}).dump(2) << "\n";
  }
  if (const int code = report_problem(a.task, task, r); code != kExitOk) return code;
  if (a.json_output) return kExitOk;
  const json& t = *r.timing;
  char rse[32] = "n/a";
  if (t["rse"].is_number()) std::snprintf(rse, sizeof(rse), "%.2g%%", 100 * t["rse"].get<double>());
  char line[400];
  std::snprintf(line, sizeof(line),
                "%s: eager reference %.4f ms median (p25 %.4f, p75 %.4f) by %s on %s; %zu samples, rse %s, %s\n",
                task.id.c_str(), t["median_ms"].get<double>(), t["p25_ms"].get<double>(), t["p75_ms"].get<double>(),
                t["timer"].get<std::string>().c_str(), r.device.c_str(), t["samples"].get<size_t>(), rse,
                t["stop_reason"].get<std::string>().c_str());
  std::cout << line;
  return kExitOk;
}

// The template policy's source per variant, for policies that choose the
// knobs themselves (examples/learning): one process for all variants.
int run_template(const TaskArgs& a) {
  const TaskSpec task = load_task(a.task);
  if (std::string why = rollout::template_unsupported(task); !why.empty()) {
    throw InputError(a.task + ": the template policy has no template for this task: " + why);
  }
  const std::vector<std::string> variants = a.variants.empty() ? std::vector<std::string>{""} : a.variants;
  if (!a.json_output) {
    if (variants.size() != 1) throw InputError("task template: several --variant need --json");
    std::cout << rollout::template_source(task, a.mode, variants[0]);
    return kExitOk;
  }
  nlohmann::ordered_json out = {{"task_id", task.id}, {"mode", a.mode}, {"sources", nlohmann::ordered_json::object()}};
  for (const std::string& v : variants) out["sources"][v] = rollout::template_source(task, a.mode, v);
  std::cout << out.dump() << std::endl;
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
      "Validate a task (structure, ops, attributes, shapes of every variant; then its reference on a judge: "
      "NaN/Inf or constant outputs, naming the node) and print the kernel's inputs and inferred outputs");
  check->add_option("task", check_args->task, "Task file (.json or .yaml)")->required();
  check->add_flag("--json", check_args->json_output,
                  "Print the ABI table and the reference check (per-node statistics) as JSON");
  check->add_flag("--no-reference", check_args->no_reference,
                  "Static checks only: do not run the reference on a judge (it is run by default, and a task whose "
                  "reference gives NaN/Inf or a constant output is refused, exit 2)");
  check->add_option("--config", check_args->env.config,
                    "Environment config (file or preset) whose backend, device and eval_timeout_ms the judge uses");
  check->add_option("--backend", check_args->env.backend, "Backend whose judge runs the reference (default: cpu)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  check->callback([check_args, selected] { *selected = [check_args] { return run_check(*check_args); }; });

  auto baseline_args = std::make_shared<TaskArgs>();
  CLI::App* baseline = task->add_subcommand(
      "baseline",
      "Check the task's reference, then time it alone on the judge with the clock, cache flush, warm-up and "
      "stopping rule of the speedup's denominator: the eager baseline a synthesized task records");
  baseline->add_option("task", baseline_args->task, "Task file (.json or .yaml)")->required();
  baseline->add_flag("--json", baseline_args->json_output, "Print the reference report (timing, checks) as JSON");
  baseline->add_option("--config", baseline_args->env.config,
                       "Environment config (file or preset): backend, device and the timing knobs of its eval section");
  baseline->add_option("--backend", baseline_args->env.backend, "Backend to time on (overrides the config)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  baseline->callback(
      [baseline_args, selected] { *selected = [baseline_args] { return run_baseline(*baseline_args); }; });

  auto template_args = std::make_shared<TaskArgs>();
  CLI::App* tmpl = task->add_subcommand(
      "template",
      "Print the template policy's kernel template for the task with the given knobs (--variant \"fuse=1 "
      "block=256 vec=4 unroll=1 acc=4 tile=4 naive_matmul=0\", every knob named), or with --json the sources of "
      "every --variant as {\"task_id\", \"mode\", \"sources\": {variant: source}}");
  tmpl->add_option("task", template_args->task, "Task file (.json or .yaml)")->required();
  tmpl->add_option("--mode", template_args->mode, "Solution mode: cpp (CPU backend) or cuda")
      ->check(CLI::IsMember({"cpp", "cuda"}))
      ->capture_default_str();
  tmpl->add_option("--variant", template_args->variants, "Knobs of one variant; repeat for several (with --json)");
  tmpl->add_flag("--json", template_args->json_output, "Print every variant's source as one JSON object");
  tmpl->callback([template_args, selected] { *selected = [template_args] { return run_template(*template_args); }; });

  auto prompt_args = std::make_shared<TaskArgs>();
  CLI::App* prompt = task->add_subcommand(
      "prompt", "Print the first observation a policy gets for the task (system and user messages)");
  prompt->add_option("task", prompt_args->task, "Task file (.json or .yaml)")->required();
  prompt->add_flag("--json", prompt_args->json_output, "Print the observation's data (messages, tools, ABI) as JSON");
  prompt_args->env.add_to(*prompt, /*with_mode=*/true);
  prompt->callback([prompt_args, selected] { *selected = [prompt_args] { return run_prompt(*prompt_args); }; });
}

}  // namespace kforge::cli
