// Rollout steps per second with the built-in template policy (rollout
// workers: policy batches, tool-call mapping, trajectory recording, group
// rewards, a JSONL sink), against a baseline measured in the same run: the
// very same actions (read back from the workers' trajectories) driven
// straight through an EnvPool of the same size, with no policy and no worker.
// The ratio says what the workers cost on top of the environment.
//
//   bench_rollout                        CPU backend, tests/rollout/data/tasks
//   bench_rollout --backend cuda         the same on a GPU (mode cuda templates)
//   bench_rollout --tasks DIR --groups N --group-size N --concurrency N
//   bench_rollout --lanes N              N judges on the device (the env
//                                        file's placement.lanes_per_device)
//
// A first, unmeasured run compiles every template the policy will pick
// (same seeds, so the same variants), so that the measured runs see compile
// cache hits and time the same work; rounds alternate which side runs first
// and the medians are compared (a plain program: Google Benchmark cannot
// interleave two measurements).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include "kforge/rollout/jsonl_sink.h"
#include "kforge/rollout/policy/template_policy.h"
#include "kforge/rollout/worker/rollout_runner.h"

namespace {

using namespace kforge;
using namespace kforge::rollout;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string backend = "cpu";
  std::string tasks = std::string(KFORGE_SOURCE_DIR) + "/tests/rollout/data/tasks";
  int groups = 6;
  int group_size = 4;
  int concurrency = 8;
  int lanes = 0;    // 0: the env file's placement
  std::string env;  // the environment file the runs use (set in main)
};

Options& options() {
  static Options o;
  return o;
}

RolloutConfig bench_config(const fs::path& out) {
  const Options& o = options();
  RolloutConfig c;
  c.env = o.env;
  c.tasks = o.tasks;
  c.groups = o.groups;
  c.group_size = o.group_size;
  c.concurrency = o.concurrency;
  c.shuffle = false;
  c.policy.kind = PolicyKind::kTemplate;
  c.policy.template_policy.mode = o.backend == "cuda" ? "cuda" : "cpp";
  c.policy.template_policy.explore_turns = 1;  // profile one variant, then submit
  c.output = out;
  c.seed = 11;
  return c;
}

struct RunResult {
  double seconds = 0;
  int64_t steps = 0;
  std::vector<Trajectory> trajectories;
};

RunResult run_workers(const fs::path& out) {
  RolloutConfig c = bench_config(out);
  JsonlTrajectorySink sink(out);
  RolloutRunner runner(c, make_policy(c.policy), {&sink});
  const auto t0 = Clock::now();
  const RolloutStats stats = runner.run();
  RunResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.steps = stats.steps;
  r.trajectories = read_trajectories(out);
  return r;
}

// The same episodes, the same actions, the same seeds, straight into a pool:
// each env sends its episode's next recorded action as soon as the last one
// returns.
RunResult run_direct(const std::vector<Trajectory>& episodes) {
  const RolloutConfig c = bench_config("unused");
  env::EnvPool pool(env::load_env_config(c.env), c.concurrency);
  std::deque<size_t> todo;
  for (size_t i = 0; i < episodes.size(); ++i) todo.push_back(i);
  std::map<int, std::pair<size_t, size_t>> running;  // env id -> (episode, next turn)
  RunResult r;
  const auto t0 = Clock::now();
  auto start = [&](int id) {
    if (todo.empty()) return;
    const size_t e = todo.front();
    todo.pop_front();
    const Trajectory& t = episodes[e];
    pool.reset(id, parse_task(Document::from_value(t.info.at("task"), "<task>")), t.info.at("seed").get<uint64_t>());
    running[id] = {e, 0};
    pool.send_tool_calls({t.turns[0].action}, {id});
  };
  for (int id = 0; id < c.concurrency; ++id) start(id);
  while (!running.empty()) {
    for (auto& s : pool.recv(1)) {
      ++r.steps;
      auto& [e, turn] = running[s.env_id];
      ++turn;
      if (s.result.terminated || s.result.truncated || turn >= episodes[e].turns.size()) {
        running.erase(s.env_id);
        start(s.env_id);
      } else {
        pool.send_tool_calls({episodes[e].turns[turn].action}, {s.env_id});
      }
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

fs::path out_dir() {
  const fs::path d = fs::path(KFORGE_BINARY_DIR) / "bench/rollout";
  fs::create_directories(d);
  return d;
}

// The bench's environment file, or with --lanes a copy of it that appends
// `placement: {lanes_per_device: N}` (the file names no placement). The copy
// lives in the build tree, so its one relative path (compile.cache_dir) is
// made absolute against the original's folder.
std::string environment_file(const Options& o) {
  const fs::path original = fs::path(KFORGE_SOURCE_DIR) / "bench/rollout" / ("env_" + o.backend + ".yaml");
  if (o.lanes <= 0) return original.string();
  std::ifstream in(original);
  if (!in) throw std::runtime_error("bench_rollout: cannot read " + original.string());
  std::ostringstream copy;
  copy << "# " << original.string() << " with " << o.lanes << " lane(s), written by bench_rollout --lanes\n";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("placement:", 0) == 0) {
      throw std::runtime_error("bench_rollout --lanes: " + original.string() + " already names a placement");
    }
    const std::string key = "cache_dir: ";
    if (const size_t at = line.find(key); at != std::string::npos) {
      const fs::path dir = line.substr(at + key.size());
      if (dir.is_relative()) line = line.substr(0, at + key.size()) + (original.parent_path() / dir).string();
    }
    copy << line << "\n";
  }
  copy << "placement:\n  lanes_per_device: " << o.lanes << "\n";
  const fs::path out = out_dir() / ("env_" + o.backend + "_lanes" + std::to_string(o.lanes) + ".yaml");
  std::ofstream(out) << copy.str();
  return out.string();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// A phase is top-level unless another phase's name and '_' begin its name
// (verify_check under verify, spawn_arena under spawn).
bool top_level(const std::string& phase, const std::map<std::string, std::vector<double>>& phases) {
  for (const auto& [other, ms] : phases) {
    if (other != phase && phase.rfind(other + "_", 0) == 0) return false;
  }
  return true;
}

// The mean ms per turn of each top-level phase (0 in a turn without it),
// largest first, and what of the mean turn they leave unexplained.
void print_mean_phases(const std::string& action, const std::map<std::string, std::vector<double>>& phase_ms,
                       const std::vector<double>& totals) {
  if (totals.empty()) return;
  const double turns = static_cast<double>(totals.size());
  double mean_total = 0;
  for (const double t : totals) mean_total += t / turns;
  std::vector<std::pair<double, std::string>> means;
  double explained = 0;
  for (const auto& [phase, ms] : phase_ms) {
    if (!top_level(phase, phase_ms)) continue;
    double sum = 0;
    for (const double m : ms) sum += m;
    means.emplace_back(sum / turns, phase);
    explained += sum / turns;
  }
  std::sort(means.rbegin(), means.rend());
  std::string line;
  for (const auto& [ms, phase] : means) {
    if (ms < 0.05) continue;  // still in `explained`
    char buf[64];
    std::snprintf(buf, sizeof(buf), " %s %.1f", phase.c_str(), ms);
    line += buf;
  }
  std::printf("[rollout] %-8s judge's mean turn %.1f ms, top-level phases (ms):%s; outside them %.1f\n", action.c_str(),
              mean_total, line.c_str(), mean_total - explained);
}

// Where the steps' time went, by action (the template policy profiles one
// variant, then submits): steps, the median step and the judge's median turn
// (its `total`, from each turn's step info), so that a rate is read against
// the kind of work it paid for; then the judge's phases of that action whose
// median is at least 1 ms, largest first; then the mean per turn of its
// top-level phases, which (unlike medians) add up to the mean turn.
void print_steps_by_action(const std::vector<Trajectory>& trajectories) {
  struct ActionTimes {
    std::vector<double> step_ms, judge_total_ms;
    std::map<std::string, std::vector<double>> phase_ms;
  };
  std::map<std::string, ActionTimes> by_action;
  for (const Trajectory& t : trajectories) {
    for (const Turn& turn : t.turns) {
      const json env = turn.info.value("env", json::object());
      const json timings = env.value("timings", json::object());
      ActionTimes& a = by_action[env.value("action", std::string("?"))];
      a.step_ms.push_back(timings.value("step_ms", 0.0));
      const json phases = timings.value("eval_phases", json::object());
      if (phases.contains("total")) a.judge_total_ms.push_back(phases.value("total", 0.0));
      for (const auto& [phase, ms] : phases.items()) {
        if (phase != "total" && ms.is_number()) a.phase_ms[phase].push_back(ms.get<double>());
      }
    }
  }
  for (const auto& [action, a] : by_action) {
    std::printf("[rollout] %-8s %3zu steps: median step %.1f ms, the judge's turn %.1f ms (%zu judged)\n",
                action.c_str(), a.step_ms.size(), median(a.step_ms), median(a.judge_total_ms), a.judge_total_ms.size());
    std::vector<std::pair<double, std::string>> phases;
    for (const auto& [phase, ms] : a.phase_ms) {
      if (const double m = median(ms); m >= 1.0) phases.emplace_back(m, phase);
    }
    std::sort(phases.rbegin(), phases.rend());
    std::string line;
    for (const auto& [ms, phase] : phases) line += " " + phase + " " + std::to_string(static_cast<int>(ms + 0.5));
    std::printf("[rollout] %-8s judge's median phases (ms):%s\n", action.c_str(), line.c_str());
    print_mean_phases(action, a.phase_ms, a.judge_total_ms);
  }
  // A judge serves one turn at a time: the mean turn over every action bounds
  // the steps one judge (one lane) can judge a second, whatever is in flight.
  double total_ms = 0;
  size_t turns = 0;
  for (const auto& [action, a] : by_action) {
    for (const double ms : a.judge_total_ms) total_ms += ms;
    turns += a.judge_total_ms.size();
  }
  if (turns > 0) {
    const double mean_ms = total_ms / static_cast<double>(turns);
    std::printf("[rollout] the judge's mean turn %.1f ms over %zu turns: at most %.2f steps/s a lane\n", mean_ms, turns,
                1000.0 / mean_ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options& o = options();
  int rounds = 3;
  for (int i = 1; i < argc; ++i) {
    auto value = [&](const char* flag) -> const char* {
      return std::strcmp(argv[i], flag) == 0 && i + 1 < argc ? argv[++i] : nullptr;
    };
    if (const char* v = value("--backend")) {
      o.backend = v;
    } else if (const char* v2 = value("--tasks")) {
      o.tasks = v2;
    } else if (const char* v3 = value("--groups")) {
      o.groups = std::atoi(v3);
    } else if (const char* v4 = value("--group-size")) {
      o.group_size = std::atoi(v4);
    } else if (const char* v5 = value("--concurrency")) {
      o.concurrency = std::atoi(v5);
    } else if (const char* v6 = value("--rounds")) {
      rounds = std::max(1, std::atoi(v6));
    } else if (const char* v7 = value("--lanes")) {
      o.lanes = std::atoi(v7);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--backend cpu|cuda] [--tasks DIR] [--groups N] [--group-size N] [--concurrency N] "
                   "[--rounds N] [--lanes N]\n",
                   argv[0]);
      return 2;
    }
  }
  o.env = environment_file(o);
  std::printf("warm-up: compiling the template policy's templates (%s backend, %s; %s)\n", o.backend.c_str(),
              o.tasks.c_str(), o.env.c_str());
  const RunResult warm = run_workers(out_dir() / "warmup.jsonl");
  std::printf("warm-up: %lld steps in %.1f s\n", static_cast<long long>(warm.steps), warm.seconds);
  // Rounds alternate which side goes first, so that a machine whose load
  // drifts during the run does not favour one side.
  std::vector<double> workers, direct;
  int64_t steps = 0;
  std::vector<Trajectory> measured;
  for (int r = 0; r < rounds; ++r) {
    for (int side = 0; side < 2; ++side) {
      if ((side == 0) == (r % 2 == 0)) {
        RunResult w = run_workers(out_dir() / "measured.jsonl");
        workers.push_back(w.steps / w.seconds);
        steps = w.steps;
        std::printf("round %d: rollout workers   %lld steps in %6.2f s  %7.2f steps/s\n", r + 1,
                    static_cast<long long>(w.steps), w.seconds, workers.back());
        measured = std::move(w.trajectories);
      } else {
        const RunResult d = run_direct(warm.trajectories);
        direct.push_back(d.steps / d.seconds);
        std::printf("round %d: direct EnvPool    %lld steps in %6.2f s  %7.2f steps/s\n", r + 1,
                    static_cast<long long>(d.steps), d.seconds, direct.back());
      }
    }
  }
  const double ws = median(workers), ds = median(direct);
  std::printf(
      "\nrollout steps per second (%s backend, template policy, %d groups x %d, %d in flight, %lld steps, median "
      "of %d rounds):\n"
      "  rollout workers + template policy     %8.2f steps/s\n"
      "  baseline: the same actions, EnvPool   %8.2f steps/s\n"
      "  workers / direct                      %8.3f\n",
      o.backend.c_str(), o.groups, o.group_size, o.concurrency, static_cast<long long>(steps), rounds, ws, ds,
      ds > 0 ? ws / ds : 0.0);
  print_steps_by_action(measured);
  return 0;
}
