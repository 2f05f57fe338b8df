#include "kforge/rollout/replay/replay.h"

#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "kforge/core/error.h"
#include "kforge/core/sha256.h"
#include "kforge/core/task_set.h"
#include "text_table.h"

namespace kforge::rollout::replay {
namespace {

// Task specs by id, from the task sets and from trajectories that carry one.
class TaskIndex {
 public:
  void add_set(const std::filesystem::path& path) {
    for (TaskSpec& t : load_task_set(path)) {
      const std::string id = t.id;
      by_id_.emplace(id, std::make_unique<TaskSpec>(std::move(t)));
    }
  }
  const TaskSpec* find(const RecordedEpisode& e, std::vector<std::string>* notes) {
    auto it = by_id_.find(e.task_id);
    if (it != by_id_.end()) return it->second.get();
    if (e.task.is_object()) {
      try {
        auto spec = std::make_unique<TaskSpec>(parse_task(Document::from_value(e.task, e.file + ": info.task")));
        if (spec->id == e.task_id) return by_id_.emplace(e.task_id, std::move(spec)).first->second.get();
      } catch (const InputError& err) {
        if (reported_.insert(e.task_id).second)
          notes->push_back(std::string("task carried by a trajectory is invalid: ") + err.what());
      }
    }
    if (reported_.insert(e.task_id).second) {
      notes->push_back("task " + e.task_id + " is not in the task sets given (--tasks)");
    }
    return nullptr;
  }

 private:
  std::map<std::string, std::unique_ptr<TaskSpec>> by_id_;
  std::set<std::string> reported_;
};

// The solution an episode's verdict is about: its submit or auto-submitted
// last solution; for an episode without a verdict, its last solution.
const RecordedTurn* final_solution_turn(const RecordedEpisode& e) {
  if (e.final_turn >= 0 && e.turns[static_cast<size_t>(e.final_turn)].solution) {
    return &e.turns[static_cast<size_t>(e.final_turn)];
  }
  for (auto it = e.turns.rbegin(); it != e.turns.rend(); ++it) {
    if (it->solution) return &*it;
  }
  return nullptr;
}

std::vector<TechniqueStat> technique_stats(const std::vector<SolutionTechniques>& list) {
  std::vector<TechniqueStat> out;
  for (const auto& name : technique_names()) {
    TechniqueStat s;
    s.name = name;
    std::vector<double> speedups;
    for (const auto& t : list) {
      if (!t.report.has(name)) continue;
      ++s.solutions;
      if (t.success) {
        ++s.successes;
        if (t.speedup) speedups.push_back(*t.speedup);
      }
    }
    s.speedup = distribution(speedups);
    if (s.solutions > 0) out.push_back(s);
  }
  return out;
}

json episode_row(const RecordedEpisode& e) {
  return {{"id", e.id},
          {"group_id", e.group_id},
          {"task_id", e.task_id},
          {"policy_version", e.policy_version},
          {"file", e.file},
          {"line", e.line},
          {"turns", e.turns.size()},
          {"turns_used", e.turns_used},
          {"total_reward", e.total_reward},
          {"success", e.success},
          {"final_outcome", e.final_outcome},
          {"final_speedup", e.final_speedup ? json(*e.final_speedup) : json(nullptr)},
          {"failure_cause", e.failure_cause},
          {"terminated", e.terminated},
          {"truncated", e.truncated}};
}

}  // namespace

ReplayAnalysis analyze_replay(const std::vector<std::filesystem::path>& files, const ReplayOptions& options) {
  if (options.reevaluate && !options.env) throw InputError("replay: re-evaluation needs an environment config");
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  TaskIndex tasks;
  for (const auto& set : options.task_sets) tasks.add_set(set);

  ReplayAnalysis a;
  a.recorded = read_trajectory_files(files);
  log("read " + std::to_string(a.recorded.episodes.size()) + " trajectories from " + std::to_string(a.recorded.files) +
      " file(s)" +
      (a.recorded.problems.empty() ? "" : ", " + std::to_string(a.recorded.problems.size()) + " problem(s)"));
  a.summary = summarize(a.recorded.episodes);

  if (options.techniques) {
    // Identical solutions (same mode, options and source) are analyzed once.
    std::map<std::string, TechniqueReport> seen;
    size_t sass_budget = options.max_sass_solutions;
    for (const auto& e : a.recorded.episodes) {
      const RecordedTurn* turn = final_solution_turn(e);
      if (turn == nullptr) continue;
      const Solution& s = *turn->solution;
      std::string key = solution_mode_name(s.mode) + '\x1f' + s.source;
      for (const auto& o : s.options) key += '\x1f' + o;
      const std::string hash = sha256_hex(key);
      auto it = seen.find(hash);
      if (it == seen.end()) {
        const TaskSpec* task = tasks.find(e, &a.notes);
        TechniqueOptions topts = options.technique;
        const bool cuda = s.mode != SolutionMode::kCpp;
        const bool over_budget = cuda && topts.read_sass && sass_budget == 0;
        if (over_budget) topts.read_sass = false;
        if (cuda && topts.read_sass) --sass_budget;
        TechniqueReport report = find_techniques(s, task, topts);
        if (over_budget) {
          report.sass_note = "SASS not read: more than " + std::to_string(options.max_sass_solutions) +
                             " distinct CUDA solutions (max_sass_solutions)";
        }
        it = seen.emplace(hash, std::move(report)).first;
      }
      SolutionTechniques st;
      st.trajectory_id = e.id;
      st.task_id = e.task_id;
      st.turn = turn->index;
      st.mode = solution_mode_name(s.mode);
      st.success = e.success;
      st.speedup = e.final_speedup;
      st.report = it->second;
      a.techniques.push_back(std::move(st));
    }
    a.technique_stats = technique_stats(a.techniques);
    log("techniques of " + std::to_string(a.techniques.size()) + " final solutions (" + std::to_string(seen.size()) +
        " distinct)");
  }

  if (options.reevaluate) {
    const TaskLookup lookup = [&](const RecordedEpisode& e) { return tasks.find(e, &a.notes); };
    size_t last_logged = 0;
    a.reevaluation =
        reevaluate(a.recorded.episodes, lookup, *options.env, options.reeval, [&](size_t done, size_t total) {
          if (done == total || done >= last_logged + 10) {
            last_logged = done;
            log("re-evaluation: " + std::to_string(done) + "/" + std::to_string(total) + " runs");
          }
        });
  }
  return a;
}

json to_json(const ReplayAnalysis& a) {
  json problems = json::array(), episodes = json::array(), techniques = json::array(), stats = json::array();
  for (const auto& p : a.recorded.problems)
    problems.push_back({{"file", p.file}, {"line", p.line}, {"message", p.message}});
  for (const auto& e : a.recorded.episodes) episodes.push_back(episode_row(e));
  for (const auto& t : a.techniques) {
    json j = to_json(t.report);
    j["trajectory_id"] = t.trajectory_id;
    j["task_id"] = t.task_id;
    j["turn"] = t.turn;
    j["mode"] = t.mode;
    j["success"] = t.success;
    j["speedup"] = t.speedup ? json(*t.speedup) : json(nullptr);
    techniques.push_back(j);
  }
  for (const auto& s : a.technique_stats) {
    stats.push_back(
        {{"name", s.name}, {"solutions", s.solutions}, {"successes", s.successes}, {"speedup", to_json(s.speedup)}});
  }
  return {{"files", a.recorded.files},
          {"lines", a.recorded.lines},
          {"problems", problems},
          {"episodes", episodes},
          {"summary", to_json(a.summary)},
          {"techniques", techniques},
          {"technique_stats", stats},
          {"reevaluation", a.reevaluation ? to_json(*a.reevaluation) : json(nullptr)},
          {"notes", a.notes}};
}

std::string format_replay(const ReplayAnalysis& a) {
  std::ostringstream out;
  out << "Read " << a.recorded.episodes.size() << " trajectories from " << a.recorded.files << " file(s)";
  if (!a.recorded.problems.empty()) out << "; " << a.recorded.problems.size() << " line(s) or file(s) skipped";
  out << "\n";
  constexpr size_t kShown = 20;  // the rest are in --json and the report
  for (size_t i = 0; i < a.recorded.problems.size() && i < kShown; ++i) {
    const ReadProblem& p = a.recorded.problems[i];
    out << "  skipped " << p.file << (p.line ? ":" + std::to_string(p.line) : "") << ": " << p.message << "\n";
  }
  if (a.recorded.problems.size() > kShown) out << "  ... and " << a.recorded.problems.size() - kShown << " more\n";
  if (a.recorded.episodes.empty()) return out.str();
  out << "\n" << format_summary(a.summary);
  if (!a.technique_stats.empty()) {
    out << "\nTechniques in the final solutions (" << a.techniques.size() << " analyzed";
    size_t sass = 0;
    for (const auto& t : a.techniques) sass += t.report.sass_read ? 1 : 0;
    out << ", SASS read for " << sass << "):\n";
    TextTable table({"technique", "solutions", "successful", "speedup p50 of successful"});
    for (const auto& s : a.technique_stats) {
      table.add({s.name, std::to_string(s.solutions), std::to_string(s.successes),
                 s.speedup.n ? format_number(s.speedup.median) + "x" : "-"});
    }
    out << table.render();
    std::set<std::string> sass_notes;
    for (const auto& t : a.techniques) {
      if (!t.report.sass_note.empty()) sass_notes.insert(t.report.sass_note);
    }
    for (const auto& n : sass_notes) out << "  " << n << "\n";
  }
  if (a.reevaluation) out << "\n" << format_reevaluation(*a.reevaluation);
  for (const auto& n : a.notes) out << "note: " << n << "\n";
  return out.str();
}

}  // namespace kforge::rollout::replay
