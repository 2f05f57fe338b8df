// The device pool's figures (docs/execution.md#lanes-and-the-device-pool, "What
// lanes buy"), on the backend of $KFORGE_BENCH_BACKEND (cpu, the default, or
// cuda):
//
//   BM_PoolThroughput/L   new candidates fully evaluated as a submit step is
//                         (compile + verify + time; the profile stage only
//                         where runs_profile() says a submit has it) per
//                         minute with L lanes (cuda: lanes on one GPU; cpu: slots),
//                         over >= 10 tasks (the bundled examples, base shape
//                         and last variant, two candidates each), each
//                         candidate compiled fresh and judged as soon as it is
//                         compiled, for L = 1, 2 and the loaded lanes.
//                         Baseline in the same run: L = 1, so
//                         `over_one_lane` is the pool's gain. Also printed:
//                         the physical bound (a minute over the median
//                         exclusive GPU time of a candidate, its timing and
//                         profile; and over the mean, which timing's long
//                         tail sets) and how close the run came to it, and the
//                         cores that the compiles of that rate keep busy
//                         (median compile time x candidates per second),
//                         and each phase's median (and the top-level
//                         phases' mean: a lane's time is their sum), with `unnamed`: the
//                         judge's time that no top-level phase names; and a
//                         lane's time per candidate outside its judge's turns
//                         (near 0: the lanes never wait for work) with when
//                         the last compile was done.
//   BM_SpeedupUnderLoad   the speedup of one candidate/reference pair measured
//                         R times alone, then R times while other candidates
//                         compile and verify on the same device through the
//                         other lanes: `change_pct` = |median loaded / median
//                         alone - 1| (target < 1 %). On cuda the loaded run is
//                         repeated with the GPU gate off (`ungated_change_pct`),
//                         which is what the gate prevents.
//
// Environment: KFORGE_BENCH_BACKEND (cpu|cuda), KFORGE_BENCH_LANES (the L of
// the loaded runs; default 4 on cuda, 2 on cpu), KFORGE_BENCH_REPEATS (R,
// default 10), KFORGE_BENCH_ROUNDS (the throughput set this many times over,
// each round's sources new; default 3 on cuda, where one round of 20
// candidates lasts a few seconds and the first compile's latency would
// weigh on it, 1 on cpu), KFORGE_BENCH_DEVICES (cuda: "0,1,..." to spread
// the throughput run over several GPUs with L lanes each), KFORGE_BENCH_WARMUP_MS
// (the submit's warm-up instead of the default, to compare warm-ups in one run),
// KFORGE_BENCH_DECIDED (the reward preset or file whose decision stops the
// throughput set's timing, as an environment's eval.stop_when_decided does;
// default `default`, the environment's default reward; `off` times to
// target_rse instead),
// KFORGE_BENCH_TURNS (a task's candidates share an input seed this many at a
// time, as an episode's turns do, so the judge's reference cache serves all
// but the first; default 4, 1 reuses nothing). The
// runners' hardware queues follow KFORGE_RUNNER_CUDA_CONNECTIONS
// (resolved_runner_cuda_connections, device_pool.h).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kforge/core/remove_tree.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/compile_service.h"
#include "kforge/env/device_pool.h"
#include "kforge/env/env_pool.h"
#include "kforge/reward/reward.h"

namespace kforge::env {
namespace {

// The phases of a report that follow one another: their parts (`verify_*`,
// `spawn_*`, `gate_wait_*`, `time_warmup`, ...) are inside them, so these add
// up to the judge's total but for what no phase names.
constexpr const char* kTopLevelPhases[] = {"inspect", "fit",     "gate_wait", "plan",   "runner_start",
                                           "arena",   "spawn",   "verify",    "settle", "time",
                                           "refill",  "profile", "retire",    "release"};

// The judge's time in a report that no top-level phase names: what a new
// phase should account for next.
double unnamed_ms(const nlohmann::json& phase_ms) {
  double named = 0;
  for (const char* phase : kTopLevelPhases) named += phase_ms.value(phase, 0.0);
  return phase_ms.value("total", 0.0) - named;
}

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double sum_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double cv(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / static_cast<double>(v.size() - 1)) / mean;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

bool cuda() {
  const char* v = std::getenv("KFORGE_BENCH_BACKEND");
  return v != nullptr && std::string(v) == "cuda";
}

int loaded_lanes() { return env_int("KFORGE_BENCH_LANES", cuda() ? 4 : 2); }
int rounds() { return std::max(1, env_int("KFORGE_BENCH_ROUNDS", cuda() ? 3 : 1)); }
// Candidates of one task that share an input seed, as the turns of one
// episode do (the judge's reference cache serves the later ones): a task's
// k-th candidate is turn k % turns of episode k / turns. 1: every candidate
// its own episode, so nothing is reused.
int turns_per_episode() { return std::max(1, env_int("KFORGE_BENCH_TURNS", 4)); }

std::vector<int> bench_devices() {
  std::vector<int> out;
  const char* v = std::getenv("KFORGE_BENCH_DEVICES");
  std::string s = v != nullptr ? v : "0";
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(std::atoi(item.c_str()));
  }
  if (out.empty()) out.push_back(0);
  return out;
}

// The reward whose decision stops the throughput set's timing, as an
// environment's step asks for it (eval.stop_when_decided, on by default);
// "" when KFORGE_BENCH_DECIDED is `off`.
std::string decided_reward() {
  const char* reward = std::getenv("KFORGE_BENCH_DECIDED");
  const std::string name = reward != nullptr && *reward != '\0' ? reward : "default";
  return name == "off" ? "" : name;
}

// A submit's options before the reward's decision is asked for: timing to
// target_rse. The pair compared alone and under load is timed so, since its
// figure is the timer's own agreement and precision, which a rule that stops
// once a reward is decided would not test.
EvalOptions pair_options() {
  EvalOptions o;
  if (!cuda()) {
    // configs/env/cpu.yaml's timing knobs: a CPU call takes milliseconds.
    o.warmup_ms = 20;
    o.max_time_ms = 1000;
    o.min_samples = 5;
    o.target_rse = 0.01;
  }
  o.hardware_metrics = false;  // counters only on profile actions
  // A knob for trying other warm-ups against the default in one run.
  if (const int warmup = env_int("KFORGE_BENCH_WARMUP_MS", -1); warmup >= 0) o.warmup_ms = warmup;
  o.stop_when_decided = false;
  return o;
}

// What a submit step asks for in production, minus nothing.
EvalOptions submit_options() {
  EvalOptions o = pair_options();
  const std::string reward = decided_reward();
  o.stop_when_decided = !reward.empty();
  if (o.stop_when_decided) fit_eval_to_reward(reward::RewardFunction::load(reward), &o);
  return o;
}

// How the throughput set's timing stops, for its lines.
std::string timing_rule() {
  const std::string reward = decided_reward();
  return reward.empty() ? "timing to target_rse" : "timing until the '" + reward + "' reward is decided";
}

ExecutorConfig pool_config(int lanes, const std::vector<int>& devices, bool gate = true) {
  ExecutorConfig c;
  c.backend = cuda() ? BackendKind::kCuda : BackendKind::kCpu;
  c.devices = devices;
  c.lanes_per_device = lanes;
  c.cpu_slots = lanes;
  c.gpu_gate = gate;
  // A private gate: nothing else on the machine waits for this run.
  c.gate_dir = fs::temp_directory_path() / ("kforge-bench-gate-" + std::to_string(::getpid()));
  return c;
}

struct Job {
  TaskSpec task;
  Solution solution;
};

// >= 10 tasks: every bundled example at its base shape and its last shape
// variant, with its naive and fast solution each; `tag` makes every source
// new, so each is a fresh compile as a policy's would be.
std::vector<Job> jobs(const std::string& tag) {
  std::vector<Job> out;
  const fs::path root = fs::path(KFORGE_SOURCE_DIR) / "examples";
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root)) {
    if (fs::exists(e.path() / "task.json")) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  const std::string sub = cuda() ? "cuda" : "cpu";
  const std::string ext = cuda() ? ".cu" : ".cpp";
  for (const auto& dir : dirs) {
    TaskSpec base = load_task(dir / "task.json");
    std::vector<TaskSpec> tasks = {base};
    if (!base.shape_variants.empty()) tasks.push_back(base.with_variant(base.shape_variants.size() - 1));
    for (size_t t = 0; t < tasks.size(); ++t) {
      tasks[t].shape_variants.clear();
      tasks[t].baselines.reset();
      tasks[t].id += "#" + std::to_string(t);
      for (const char* file : {"naive", "fast"}) {
        Solution s;
        s.mode = cuda() ? SolutionMode::kCuda : SolutionMode::kCpp;
        s.source = read_file(dir / sub / (std::string(file) + ext)) + "\n// bench " + tag + " " + tasks[t].id + "\n";
        s.origin = (dir / sub / file).string();
        out.push_back({tasks[t], s});
      }
    }
  }
  return out;
}

std::unique_ptr<CompileService> make_compiler(const std::string& name) {
  CompileServiceConfig config;
  config.cache_dir = fs::temp_directory_path() / ("kforge-bench-pool-" + std::to_string(::getpid()) + "-" + name);
  config.threads = 0;  // one per usable core, the production default
  auto compiler = std::make_unique<CompileService>(config);
  add_default_compilers(*compiler, cuda() ? "cuda" : "cpu");
  return compiler;
}

void remove_cache(const CompileService& c) { kforge::remove_tree(c.cache_dir()); }

// Candidates per minute over `job_list`, compiled and judged as they come.
struct ThroughputResult {
  double per_minute = 0;
  // Between the first report and the last: the rate once the compiles keep
  // the lanes fed (a run's first candidate waits for a whole compile).
  double steady_per_minute = 0;
  int correct = 0;
  int candidates = 0;
  int reports = 0;  // the mean of a phase is over every report, with or without it
  std::map<std::string, std::vector<double>> phases;
  std::vector<double> compile_ms;
  // A lane's time per candidate that no judge's `total` covers: the lanes'
  // time from the first request to the last report (lanes x that span),
  // less every report's total, per candidate (the executor's round trip,
  // the judge's work after its report, and a lane left without a compiled
  // candidate).
  double outside_judge_ms = 0;
  // When the last compile was done, and the run's whole length: lanes can
  // starve only before the first.
  double compiled_s = 0;
  double run_s = 0;
};

ThroughputResult run_throughput(DevicePool& pool, const std::vector<Job>& job_list, CompileService& compiler,
                                int lanes) {
  ThroughputResult out;
  const auto start = Clock::now();
  std::vector<std::future<CompileResult>> compiles;
  for (const auto& j : job_list) compiles.push_back(compiler.submit(j.solution, compile_context_for(j.task)));
  // Each report with the moment it came back: the steady rate is taken
  // between the first and the last, without the first compile's latency.
  using Done = std::pair<EvalReport, Clock::time_point>;
  std::vector<std::future<Done>> evals;
  std::map<std::string, uint64_t> candidates_of_task;
  std::optional<Clock::time_point> first_request;
  for (size_t i = 0; i < job_list.size(); ++i) {
    CompileResult c = compiles[i].get();
    if (!c.ok) {
      std::fprintf(stderr, "bench_pool: compile failed: %s\n", c.diagnostics.c_str());
      continue;
    }
    out.compile_ms.push_back(c.compile_ms);
    EvalRequest req;
    req.task = job_list[i].task;
    req.artifact = c.artifact;
    req.options = submit_options();
    req.verify = req.time = true;  // a submit step
    const uint64_t k = candidates_of_task[req.task.id]++;
    req.input_seed = verification_input_seed(1 + k / static_cast<uint64_t>(turns_per_episode()));
    req.profile = runs_profile(ActionType::kSubmit, req.options);
    if (!first_request) first_request = Clock::now();
    evals.push_back(std::async(std::launch::async, [report = pool.submit(std::move(req))]() mutable {
      EvalReport r = report.get();
      return Done{std::move(r), Clock::now()};
    }));
  }
  out.compiled_s = seconds_since(start);
  std::vector<std::pair<Clock::time_point, double>> done_at;  // when, the judge's total
  for (auto& f : evals) {
    auto [r, at] = f.get();
    done_at.emplace_back(at, r.phase_ms.value("total", 0.0));
    ++out.reports;
    out.correct += r.correct();
    if (!r.correct()) std::fprintf(stderr, "bench_pool: %s\n", r.summary.c_str());
    for (const auto& [phase, ms] : r.phase_ms.items()) {
      if (ms.is_number()) out.phases[phase].push_back(ms.get<double>());
    }
    if (r.phase_ms.contains("total")) out.phases["unnamed"].push_back(unnamed_ms(r.phase_ms));
  }
  out.candidates = static_cast<int>(job_list.size());
  out.run_s = seconds_since(start);
  out.per_minute = job_list.size() / (out.run_s / 60.0);
  std::sort(done_at.begin(), done_at.end());
  if (done_at.size() > 1) {
    const double span_s = std::chrono::duration<double>(done_at.back().first - done_at.front().first).count();
    if (span_s > 0) out.steady_per_minute = static_cast<double>(done_at.size() - 1) / (span_s / 60.0);
    double judged_ms = 0;
    for (const auto& done : done_at) judged_ms += done.second;
    const double served_s = std::chrono::duration<double>(done_at.back().first - *first_request).count();
    out.outside_judge_ms = (lanes * served_s * 1000 - judged_ms) / static_cast<double>(done_at.size());
  }
  return out;
}

double g_one_lane_per_minute = 0;

void BM_PoolThroughput(benchmark::State& state) {
  const int lanes = static_cast<int>(state.range(0));
  const std::vector<int> devices = lanes == 1 ? std::vector<int>{bench_devices().front()} : bench_devices();
  for (auto _ : state) {
    auto pool = make_device_pool(pool_config(lanes, devices));
    pool->device_name();  // judge start-up stays outside the measurement
    auto compiler = make_compiler("tp" + std::to_string(lanes));
    std::vector<Job> job_list;
    for (int round = 0; round < rounds(); ++round) {
      std::vector<Job> more = jobs("tp" + std::to_string(lanes) + "r" + std::to_string(round));
      job_list.insert(job_list.end(), more.begin(), more.end());
    }
    const ThroughputResult r = run_throughput(*pool, job_list, *compiler, lanes * static_cast<int>(devices.size()));
    remove_cache(*compiler);
    // What the judge did for its memory between requests (trims of its heap,
    // cuts of the tensor cache): work outside the phases, paid per request.
    if (lanes == 1 && devices.size() == 1) {
      const json health = pool->health();
      const json memory = health.value("memory", json::object());
      const json device = health.value("device", json::object());
      const json references = health.value("reference_cache", json::object());
      std::printf(
          "[pool] the judge after the run: rss %.0f MiB, heap trims %d, device releases %d, cache cuts %d, "
          "references reused %d of %d (%d turns an episode), kept %.0f MiB\n",
          memory.value("rss_bytes", 0.0) / (1 << 20), memory.value("trims", 0), memory.value("device_releases", 0),
          device.value("cache_cuts", 0), references.value("hits", 0),
          references.value("hits", 0) + references.value("misses", 0), turns_per_episode(),
          references.value("bytes", 0.0) / (1 << 20));
    }
    std::printf(
        "[pool] %d lane(s) x %zu device(s), %s: %.1f candidates/min (%.1f from the first report to the last), "
        "median ms per phase:",
        lanes, devices.size(), timing_rule().c_str(), r.per_minute, r.steady_per_minute);
    for (const auto& [phase, v] : r.phases) std::printf(" %s %.1f", phase.c_str(), median(v));
    std::printf("\n");
    // A lane's time is the sum of its turns, so the mean says where it goes:
    // long turns (timings that sample long before reaching target_rse) hide
    // behind the medians.
    auto phase_mean = [&r](const char* phase) {
      auto it = r.phases.find(phase);
      return it == r.phases.end() || r.reports == 0 ? 0.0 : sum_of(it->second) / r.reports;
    };
    std::printf("[pool] %d lane(s): mean ms per candidate of the top-level phases:", lanes);
    for (const char* phase : kTopLevelPhases) {
      if (r.phases.count(phase) != 0) std::printf(" %s %.1f", phase, phase_mean(phase));
    }
    if (auto it = r.phases.find("total"); it != r.phases.end()) {
      std::printf(" (total %.1f, max %.1f)", phase_mean("total"),
                  *std::max_element(it->second.begin(), it->second.end()));
    }
    std::printf("\n");
    std::printf(
        "[pool] between reports, a lane outside its judge's total: %.1f ms per candidate; the last compile "
        "done at %.1f s of %.1f\n",
        r.outside_judge_ms, r.compiled_s, r.run_s);
    state.counters["outside_judge_ms"] = r.outside_judge_ms;
    // What only one candidate at a time may do on a GPU: its timing and profile.
    auto phase_median = [&r](const char* phase) {
      auto it = r.phases.find(phase);
      return it == r.phases.end() ? 0.0 : median(it->second);
    };
    const double exclusive_ms = phase_median("time") + phase_median("profile");
    const double bound = exclusive_ms > 0 ? 60000.0 / exclusive_ms * static_cast<double>(devices.size()) : 0;
    // The set's own bound: a minute over the mean exclusive time, which a
    // long tail of timings (candidates that sample long) sets, not the median.
    const double mean_exclusive_ms = phase_mean("time") + phase_mean("profile");
    const double mean_bound =
        mean_exclusive_ms > 0 ? 60000.0 / mean_exclusive_ms * static_cast<double>(devices.size()) : 0;
    const double compile_s = median(r.compile_ms) / 1000.0;
    std::printf(
        "[pool] physical bound %.0f candidates/min (median exclusive %.1f ms; %.0f by the mean, %.1f ms); this run "
        "%.0f%% of it (%.0f%% of the mean's); compiles: median %.2f s, keeping %.1f cores busy at this rate (%.1f at "
        "the bound)\n",
        bound, exclusive_ms, mean_bound, mean_exclusive_ms, bound > 0 ? 100 * r.per_minute / bound : 0,
        mean_bound > 0 ? 100 * r.per_minute / mean_bound : 0, compile_s, r.per_minute / 60 * compile_s,
        bound / 60 * compile_s);
    state.counters["bound_per_minute"] = bound;
    state.counters["mean_bound_per_minute"] = mean_bound;
    state.counters["compile_cores"] = r.per_minute / 60 * compile_s;
    if (lanes == 1) g_one_lane_per_minute = r.per_minute;
    state.counters["candidates"] = r.candidates;
    state.counters["correct"] = r.correct;
    state.counters["per_minute"] = r.per_minute;
    state.counters["steady_per_minute"] = r.steady_per_minute;
    state.counters["per_minute_per_device"] = r.per_minute / static_cast<double>(devices.size());
    if (g_one_lane_per_minute > 0) state.counters["over_one_lane"] = r.per_minute / g_one_lane_per_minute;
  }
}
// 1 lane (the baseline), 2, and the loaded lanes: where lanes stop paying.
BENCHMARK(BM_PoolThroughput)
    ->Apply([](benchmark::internal::Benchmark* b) {
      b->Arg(1);
      if (loaded_lanes() > 2) b->Arg(2);
      if (loaded_lanes() > 1) b->Arg(loaded_lanes());
    })
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

// The pair: a candidate/reference pair whose kernel takes tens of
// microseconds on an H200 (affine_relu6 at 32768 x 1024) or a millisecond on
// a CPU (its cpu version at the example's base shape).
EvalRequest pair_request(CompileService& compiler) {
  TaskSpec task = load_task(fs::path(KFORGE_SOURCE_DIR) / "examples" / "affine_relu6" / "task.json");
  task.shape_variants.clear();
  task.baselines.reset();
  if (cuda()) task.inputs[0].shape[0] *= 8;
  Solution s;
  s.mode = cuda() ? SolutionMode::kCuda : SolutionMode::kCpp;
  s.source =
      read_file(fs::path(KFORGE_SOURCE_DIR) / "examples" / "affine_relu6" / (cuda() ? "cuda/fast.cu" : "cpu/fast.cpp"));
  CompileResult c = compiler.submit(s, compile_context_for(task)).get();
  if (!c.ok) throw std::runtime_error("the pair's candidate does not compile: " + c.diagnostics);
  EvalRequest req;
  req.task = task;
  req.artifact = c.artifact;
  req.verify = req.time = true;
  req.options = pair_options();
  req.profile = runs_profile(ActionType::kSubmit, req.options);
  return req;
}

// R speedups of the pair, one evaluation at a time.
std::vector<double> speedups(DevicePool& pool, const EvalRequest& pair, int repeats, std::vector<double>* gate_wait) {
  std::vector<double> out;
  for (int i = 0; i < repeats; ++i) {
    EvalReport r = pool.submit(pair).get();
    if (!r.correct() || !r.timing || !r.timing->speedup) {
      std::fprintf(stderr, "bench_pool: the pair was not timed: %s\n", r.summary.c_str());
      continue;
    }
    out.push_back(*r.timing->speedup);
    if (gate_wait != nullptr) gate_wait->push_back(r.phase_ms.value("gate_wait", 0.0));
  }
  return out;
}

// Keeps `lanes` verifications of freshly compiled candidates in flight on
// the pool until stopped: compile and verify load on the same device.
class Load {
 public:
  Load(DevicePool* pool, int lanes, const std::string& tag) : compiler_(make_compiler("load-" + tag)) {
    thread_ = std::thread([this, pool, lanes, tag] {
      int round = 0;
      std::vector<std::future<EvalReport>> in_flight;
      while (!stop_) {
        std::vector<Job> list = jobs(tag + "-" + std::to_string(round++));
        for (size_t i = 0; i < list.size() && !stop_; ++i) {
          CompileResult c = compiler_->submit(list[i].solution, compile_context_for(list[i].task)).get();
          if (!c.ok) continue;
          EvalRequest req;
          req.task = list[i].task;
          req.artifact = c.artifact;
          req.verify = true;
          req.options = submit_options();
          in_flight.push_back(pool->submit(std::move(req)));
          while (static_cast<int>(in_flight.size()) >= lanes) {
            in_flight.front().get();
            in_flight.erase(in_flight.begin());
            ++verified_;
          }
        }
      }
      for (auto& f : in_flight) f.get();
    });
  }
  ~Load() {
    stop_ = true;
    thread_.join();
    remove_cache(*compiler_);
  }
  int verified() const { return verified_; }

 private:
  std::unique_ptr<CompileService> compiler_;
  std::atomic<bool> stop_{false};
  std::atomic<int> verified_{0};
  std::thread thread_;
};

void BM_SpeedupUnderLoad(benchmark::State& state) {
  const int repeats = env_int("KFORGE_BENCH_REPEATS", 10);
  const int lanes = loaded_lanes();
  const std::vector<int> device = {bench_devices().front()};
  for (auto _ : state) {
    auto compiler = make_compiler("pair");
    const EvalRequest pair = pair_request(*compiler);
    auto measure = [&](bool gate, bool loaded, int* verified, std::vector<double>* waits) {
      auto pool = make_device_pool(pool_config(lanes, device, gate));
      pool->device_name();
      speedups(*pool, pair, 1, nullptr);  // warm: caches, clocks
      if (!loaded) return speedups(*pool, pair, repeats, waits);
      Load load(pool.get(), lanes - 1, gate ? "gated" : "ungated");
      std::this_thread::sleep_for(std::chrono::seconds(2));  // the load is running
      std::vector<double> s = speedups(*pool, pair, repeats, waits);
      *verified = load.verified();
      return s;
    };
    int verified = 0, verified_ungated = 0;
    std::vector<double> waits;
    const std::vector<double> alone = measure(true, false, nullptr, nullptr);
    const std::vector<double> loaded = measure(true, true, &verified, &waits);
    const double m_alone = median(alone), m_loaded = median(loaded);
    std::printf("[agreement] alone:");
    for (double s : alone) std::printf(" %.4f", s);
    std::printf("\n[agreement] under load (%d verifications beside it):", verified);
    for (double s : loaded) std::printf(" %.4f", s);
    std::printf("\n[agreement] gate wait of the pair under load (ms): median %.1f\n", median(waits));
    state.counters["speedup_alone"] = m_alone;
    state.counters["speedup_loaded"] = m_loaded;
    state.counters["cv_alone_pct"] = 100 * cv(alone);
    state.counters["cv_loaded_pct"] = 100 * cv(loaded);
    state.counters["change_pct"] = m_alone > 0 ? 100 * std::fabs(m_loaded / m_alone - 1) : -1;
    state.counters["load_verifications"] = verified;
    if (cuda()) {
      const std::vector<double> ungated = measure(false, true, &verified_ungated, nullptr);
      std::printf("[agreement] under load without the gate (%d verifications):", verified_ungated);
      for (double s : ungated) std::printf(" %.4f", s);
      std::printf("\n");
      state.counters["ungated_change_pct"] = m_alone > 0 ? 100 * std::fabs(median(ungated) / m_alone - 1) : -1;
    }
    remove_cache(*compiler);
  }
}
BENCHMARK(BM_SpeedupUnderLoad)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace kforge::env

BENCHMARK_MAIN();
