// kforge demo: every bundled example through the environment, all at once
// through one EnvPool per backend (compiles overlap evaluations), then a
// summary table.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "kforge/env/env_pool.h"
#include "report.h"

namespace kforge::cli {
namespace {

namespace fs = std::filesystem;

struct DemoArgs {
  std::string examples;
  std::string backends = "auto";
  bool json_output = false;
  EnvOptions env;
};

struct Item {
  std::string task_id;
  std::string backend;
  fs::path solution_path;
  std::optional<TaskSpec> task;
  std::optional<Solution> solution;
  std::string error;  // why it could not be evaluated
  std::optional<env::StepResult> result;
};

bool gpu_present() {
  std::error_code ec;
  if (fs::exists("/dev/nvidia0", ec)) return true;
  return fs::is_directory("/proc/driver/nvidia/gpus", ec) && !fs::is_empty("/proc/driver/nvidia/gpus", ec);
}

std::vector<std::string> chosen_backends(const std::string& choice) {
  if (choice == "cpu" || choice == "cuda") return {choice};
  if (choice == "all") return {"cpu", "cuda"};
#ifdef KFORGE_HAVE_CUDA
  if (gpu_present()) return {"cpu", "cuda"};
#endif
  return {"cpu"};
}

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// examples/<task>/task.json with solutions in <task>/cpu/*.cpp and
// <task>/cuda/*.cu (or .json/.yaml solution documents, or KernelBench .py
// files for torch_ext, next to them).
std::vector<Item> collect(const fs::path& root, const std::string& backend) {
  std::vector<Item> items;
  const std::string ext = backend == "cpu" ? ".cpp" : ".cu";
  const SolutionMode mode = backend == "cpu" ? SolutionMode::kCpp : SolutionMode::kCuda;
  for (const auto& dir : sorted_entries(root)) {
    const fs::path task_file = dir / "task.json";
    if (!fs::is_regular_file(task_file)) continue;
    std::optional<TaskSpec> task;
    std::string task_error;
    try {
      task = load_task(task_file);
    } catch (const InputError& e) {
      task_error = e.what();
    }
    for (const auto& file : sorted_entries(dir / backend)) {
      const std::string e = file.extension().string();
      const bool torch_ext = backend == "cuda" && e == ".py";  // KernelBench load_inline files
      if (e != ext && !torch_ext && e != ".json" && e != ".yaml" && e != ".yml") continue;
      Item item;
      item.task_id = task ? task->id : dir.filename().string();
      item.backend = backend;
      item.solution_path = file;
      item.task = task;
      item.error = task_error;
      if (item.error.empty()) {
        try {
          item.solution = load_solution(file, mode);
        } catch (const InputError& err) {
          item.error = err.what();
        }
      }
      items.push_back(std::move(item));
    }
  }
  return items;
}

void evaluate(std::vector<Item*>& items, const env::EnvConfig& config) {
  if (items.empty()) return;
  env::EnvPool pool(config, static_cast<int>(items.size()));
  std::vector<Action> actions;
  std::vector<int> ids;
  for (size_t i = 0; i < items.size(); ++i) {
    Item& it = *items[i];
    try {
      pool.reset(static_cast<int>(i), *it.task, 0);
    } catch (const InputError& e) {
      it.error = e.what();
      continue;
    }
    Action a;
    a.type = ActionType::kSubmit;
    a.solution = *it.solution;
    actions.push_back(a);
    ids.push_back(static_cast<int>(i));
  }
  pool.send(actions, ids);
  size_t received = 0;
  while (received < ids.size()) {
    for (auto& r : pool.recv(1)) {
      items[static_cast<size_t>(r.env_id)]->result = std::move(r.result);
      ++received;
    }
  }
}

std::string reward_text(const json& row) {
  if (!row.contains("reward")) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", row["reward"].get<double>());
  return buf;
}

int run_demo(const DemoArgs& a) {
  const fs::path root = a.examples;
  if (!fs::is_directory(root)) throw InputError(root.string() + ": not a directory (expected an examples folder)");
  std::vector<Item> all;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& backend : chosen_backends(a.backends)) {
    std::vector<Item> items = collect(root, backend);
    EnvOptions opts = a.env;
    opts.backend = backend;
    const env::EnvConfig config = opts.load();
    std::vector<Item*> runnable;
    for (auto& it : items) {
      if (it.error.empty()) runnable.push_back(&it);
    }
    try {
      evaluate(runnable, config);
    } catch (const SystemError& e) {
      for (auto* it : runnable) {
        if (!it->result) it->error = std::string("the ") + backend + " environment failed: " + e.what();
      }
    }
    for (auto& it : items) all.push_back(std::move(it));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (all.empty()) {
    throw InputError(root.string() +
                     ": no examples found (expected <task>/task.json with solutions in "
                     "<task>/cpu/*.cpp or <task>/cuda/*.cu)");
  }

  int incomplete = 0;
  json rows = json::array();
  for (const auto& it : all) {
    json row = {{"task", it.task_id}, {"backend", it.backend}, {"solution", it.solution_path.string()}};
    if (it.result) {
      const EvalSummary s = summarize(*it.result);
      row["verdict"] = s.verdict;
      row["speedup"] = s.speedup;
      if (!s.speedup_interval.empty()) row["speedup_interval"] = s.speedup_interval;
      row["reward"] = s.reward;
      incomplete += s.system_error;
    } else {
      row["verdict"] = "not evaluated";
      row["error"] = it.error;
      ++incomplete;
    }
    rows.push_back(row);
  }
  if (a.json_output) {
    std::cout << json({{"examples", rows}, {"seconds", seconds}}).dump(2) << "\n";
  } else {
    std::printf("%-30s %-7s %-16s %-22s %8s %8s\n", "task", "backend", "solution", "verdict", "speedup", "reward");
    for (const auto& r : rows) {
      const std::string sol = fs::path(r["solution"].get<std::string>()).filename().string();
      std::printf("%-30s %-7s %-16s %-22s %8s %8s\n", r["task"].get<std::string>().c_str(),
                  r["backend"].get<std::string>().c_str(), sol.c_str(), r["verdict"].get<std::string>().c_str(),
                  r.value("speedup", std::string("-")).c_str(), reward_text(r).c_str());
    }
    for (const auto& r : rows) {
      if (r.contains("error"))
        std::printf("\n%s: %s\n", r["solution"].get<std::string>().c_str(), r["error"].get<std::string>().c_str());
    }
    std::printf("\n%zu solution(s) in %.1f s%s\n", rows.size(), seconds,
                incomplete ? (", " + std::to_string(incomplete) + " not evaluated").c_str() : "");
  }
  return incomplete ? kExitIncomplete : kExitOk;
}

}  // namespace

void add_demo_command(CLI::App& app, CommandFn* selected) {
  auto args = std::make_shared<DemoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "demo",
      "Evaluate every bundled example (examples/<task>/task.json with solutions in cpu/*.cpp and cuda/*.cu) and "
      "print a summary table. Exits 0 when everything was evaluated, 1 when something could not be.");
  cmd->add_option("--examples", args->examples, "The examples folder")->required();
  cmd->add_option("--backends", args->backends,
                  "Backends to run: auto (cpu, plus cuda when a GPU is present), cpu, cuda or all")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "all"}));
  args->env.add_to(*cmd, /*with_mode=*/false, /*with_backend=*/false);
  cmd->add_flag("--json", args->json_output, "Print the summary as JSON");
  cmd->callback([args, selected] { *selected = [args] { return run_demo(*args); }; });
}

}  // namespace kforge::cli
