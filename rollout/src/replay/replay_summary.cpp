#include "kforge/rollout/replay/replay_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "text_table.h"

namespace kforge::rollout::replay {
namespace {

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

GroupSummary summarize_group(const std::string& key, const std::vector<const RecordedEpisode*>& episodes) {
  GroupSummary g;
  g.key = key;
  g.episodes = episodes.size();
  std::vector<double> turns, rewards, speedups;
  for (const RecordedEpisode* e : episodes) {
    turns.push_back(e->turns_used);
    rewards.push_back(e->total_reward);
    if (e->success) {
      ++g.successes;
      if (e->final_speedup) speedups.push_back(*e->final_speedup);
    } else {
      ++g.failure_causes[e->failure_cause];
    }
  }
  g.turns_used = distribution(turns);
  g.reward = distribution(rewards);
  g.speedup = distribution(speedups);
  return g;
}

std::vector<TurnProgress> progress_of(const std::vector<const RecordedEpisode*>& episodes) {
  size_t max_turns = 0;
  for (const RecordedEpisode* e : episodes) max_turns = std::max(max_turns, e->turns.size());
  std::vector<TurnProgress> out;
  for (size_t t = 0; t < max_turns; ++t) {
    size_t solved = 0;
    std::vector<double> best;
    for (const RecordedEpisode* e : episodes) {
      bool ok = false;
      std::optional<double> top;
      const size_t upto = std::min(t + 1, e->turns.size());
      for (size_t i = 0; i < upto; ++i) {
        const RecordedTurn& turn = e->turns[i];
        if (turn.outcome != "correct" || !turn.violations.empty()) continue;
        ok = true;
        if (turn.speedup) top = top ? std::max(*top, *turn.speedup) : *turn.speedup;
      }
      // The episode's verdict (a truncated episode's auto-submitted final
      // evaluation included) counts from its last turn on.
      if (e->success && upto == e->turns.size()) {
        ok = true;
        if (e->final_speedup) top = top ? std::max(*top, *e->final_speedup) : *e->final_speedup;
      }
      if (ok) ++solved;
      if (top) best.push_back(*top);
    }
    TurnProgress p;
    p.turn = static_cast<int>(t);
    p.solved_fraction = episodes.empty() ? 0.0 : static_cast<double>(solved) / episodes.size();
    if (!best.empty()) p.mean_best_speedup = std::accumulate(best.begin(), best.end(), 0.0) / best.size();
    out.push_back(p);
  }
  return out;
}

std::string percent(double f) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%.0f%%", 100.0 * f);
  return buf;
}

std::string dist_text(const Distribution& d, const std::string& suffix = "") {
  if (d.n == 0) return "-";
  return format_number(d.median) + suffix + " [" + format_number(d.p10) + ", " + format_number(d.p90) + "]";
}

std::string top_causes(const std::map<std::string, size_t>& causes, size_t n) {
  std::vector<std::pair<std::string, size_t>> v(causes.begin(), causes.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string s;
  for (size_t i = 0; i < v.size() && i < n; ++i) s += (i ? ", " : "") + v[i].first + " x" + std::to_string(v[i].second);
  return s.empty() ? "-" : s;
}

void group_table(std::ostringstream& out, const std::string& title, const std::vector<GroupSummary>& groups) {
  TextTable table({title, "episodes", "turns (mean/max)", "success", "reward p50 [p10, p90]", "speedup p50 [p10, p90]",
                   "failure causes"});
  for (const auto& g : groups) {
    table.add({g.key, std::to_string(g.episodes),
               format_number(g.turns_used.mean) + "/" + format_number(g.turns_used.max), percent(g.success_rate()),
               dist_text(g.reward), dist_text(g.speedup, "x"), top_causes(g.failure_causes, 3)});
  }
  out << table.render();
}

}  // namespace

std::string format_number(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return "-";
  char buf[32];
  const double a = std::fabs(*v);
  if (a != 0.0 && (a >= 1e5 || a < 1e-3)) {
    std::snprintf(buf, sizeof(buf), "%.2e", *v);
  } else if (a >= 100) {
    std::snprintf(buf, sizeof(buf), "%.0f", *v);
  } else if (a >= 10) {
    std::snprintf(buf, sizeof(buf), "%.1f", *v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f", *v);
  }
  return buf;
}

Distribution distribution(std::vector<double> values) {
  Distribution d;
  values.erase(std::remove_if(values.begin(), values.end(), [](double x) { return !std::isfinite(x); }), values.end());
  d.n = values.size();
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / values.size();
  d.min = values.front();
  d.max = values.back();
  d.p10 = quantile(values, 0.10);
  d.median = quantile(values, 0.50);
  d.p90 = quantile(values, 0.90);
  return d;
}

ReplaySummary summarize(const std::vector<RecordedEpisode>& episodes) {
  ReplaySummary s;
  std::vector<const RecordedEpisode*> all;
  std::map<std::string, std::vector<const RecordedEpisode*>> by_task, by_version;
  for (const auto& e : episodes) {
    all.push_back(&e);
    by_task[e.task_id].push_back(&e);
    by_version[e.policy_version.empty() ? "(untagged)" : e.policy_version].push_back(&e);
  }
  s.overall = summarize_group("all", all);
  for (const auto& [task, list] : by_task) {
    s.by_task.push_back(summarize_group(task, list));
    s.progress[task] = progress_of(list);
  }
  for (const auto& [version, list] : by_version) s.by_policy_version.push_back(summarize_group(version, list));
  return s;
}

json to_json(const Distribution& d) {
  if (d.n == 0) return {{"n", 0}};
  return {{"n", d.n},           {"mean", d.mean}, {"min", d.min}, {"p10", d.p10},
          {"median", d.median}, {"p90", d.p90},   {"max", d.max}};
}

json to_json(const GroupSummary& g) {
  return {{"key", g.key},
          {"episodes", g.episodes},
          {"successes", g.successes},
          {"success_rate", g.success_rate()},
          {"turns_used", to_json(g.turns_used)},
          {"reward", to_json(g.reward)},
          {"speedup", to_json(g.speedup)},
          {"failure_causes", g.failure_causes}};
}

json to_json(const ReplaySummary& s) {
  json tasks = json::array(), versions = json::array(), progress = json::object();
  for (const auto& g : s.by_task) tasks.push_back(to_json(g));
  for (const auto& g : s.by_policy_version) versions.push_back(to_json(g));
  for (const auto& [task, rows] : s.progress) {
    json list = json::array();
    for (const auto& p : rows) {
      list.push_back({{"turn", p.turn},
                      {"solved_fraction", p.solved_fraction},
                      {"mean_best_speedup", p.mean_best_speedup ? json(*p.mean_best_speedup) : json(nullptr)}});
    }
    progress[task] = list;
  }
  return {{"overall", to_json(s.overall)}, {"by_task", tasks}, {"by_policy_version", versions}, {"progress", progress}};
}

std::string format_summary(const ReplaySummary& s) {
  std::ostringstream out;
  const GroupSummary& o = s.overall;
  out << o.episodes << " episodes, " << s.by_task.size() << (s.by_task.size() == 1 ? " task" : " tasks") << ", "
      << s.by_policy_version.size() << " policy version" << (s.by_policy_version.size() == 1 ? "" : "s") << "; success "
      << percent(o.success_rate()) << ", reward " << dist_text(o.reward) << ", speedup " << dist_text(o.speedup, "x")
      << ", turns used " << format_number(o.turns_used.mean) << " on average\n\n";
  group_table(out, "task", s.by_task);
  out << "\n";
  group_table(out, "policy version", s.by_policy_version);
  if (!o.failure_causes.empty()) {
    out << "\nFailure causes: " << top_causes(o.failure_causes, o.failure_causes.size()) << "\n";
  }
  return out.str();
}

}  // namespace kforge::rollout::replay
