#include "kforge/core/task_set.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "kforge/core/jsonl.h"
#include "kforge/core/op_registry.h"

namespace kforge {

std::vector<TaskSpec> load_task_set(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::vector<TaskSpec> tasks;
  std::map<std::string, std::string> first_seen;
  auto add = [&](TaskSpec task, const std::string& origin) {
    // The static checks of every variant (limits included) at load, so a bad
    // task is refused before the server or anything else starts on it.
    try {
      validate_task(task);
    } catch (const InputError& e) {
      throw InputError(origin + ": " + e.what());
    }
    auto [it, inserted] = first_seen.emplace(task.id, origin);
    if (!inserted) {
      throw InputError(origin + ": duplicate task id \"" + task.id + "\" (also in " + it->second + ")");
    }
    tasks.push_back(std::move(task));
  };
  auto load_file = [&](const fs::path& file) {
    if (file.extension() != ".jsonl") {
      add(load_task(file), file.string());
      return;
    }
    for_each_jsonl_line(file, [&](const Document& doc, size_t) { add(parse_task(doc), doc.source); });
  };
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(path.string() + ": no such file or directory (the task set)");
  if (!fs::is_directory(path, ec)) {
    load_file(path);
  } else {
    const std::set<std::string> task_ext = {".json", ".yaml", ".yml", ".jsonl"};
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(path)) {
      if (entry.is_regular_file() && task_ext.count(entry.path().extension().string())) {
        files.push_back(entry.path());
      } else if (entry.is_directory()) {
        for (const char* name : {"task.json", "task.yaml", "task.yml"}) {
          if (fs::is_regular_file(entry.path() / name)) files.push_back(entry.path() / name);
        }
      }
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) load_file(f);
  }
  if (tasks.empty()) {
    throw InputError(path.string() +
                     ": no tasks found (expected a .jsonl file, a task file, or a directory of task files or of "
                     "folders with a task.json)");
  }
  return tasks;
}

}  // namespace kforge
