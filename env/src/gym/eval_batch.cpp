#include "kforge/env/eval_batch.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "kforge/core/action.h"
#include "kforge/core/error.h"
#include "kforge/core/jsonl.h"
#include "kforge/core/sha256.h"
#include "kforge/env/env_pool.h"
#include "kforge/env/executor.h"

namespace kforge::env {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// What identifies a pair across runs: the task's and the solution's content,
// not their file names (a moved dataset resumes; an edited file is new).
std::string pair_key(const TaskSpec& task, const Solution& s) {
  const json solution = {
      {"mode", solution_mode_name(s.mode)}, {"source", s.source}, {"options", s.options}, {"launch", s.launch}};
  return sha256_hex(to_json(task).dump() + '\n' + solution.dump());
}

// Tasks are shared by many pairs: each file is read once.
class TaskFiles {
 public:
  // The task, or nothing with `error` set.
  const std::optional<TaskSpec>& get(const fs::path& path, std::string* error) {
    auto it = tasks_.find(path.string());
    if (it == tasks_.end()) {
      Entry e;
      try {
        e.task = load_task(path);
      } catch (const InputError& ex) {
        e.error = ex.what();
      }
      it = tasks_.emplace(path.string(), std::move(e)).first;
    }
    *error = it->second.error;
    return it->second.task;
  }

 private:
  struct Entry {
    std::optional<TaskSpec> task;
    std::string error;
  };
  std::map<std::string, Entry> tasks_;
};

void finish_pair(EvalBatchPair* p) {
  if (p->error.empty() && p->task && p->solution) {
    p->key = pair_key(*p->task, *p->solution);
  } else {
    // Bad input has no content to key on; its label and problem stand in, so
    // a rerun does not report it twice.
    p->key = "input:" + sha256_hex(p->label + '\n' + p->error);
  }
}

EvalBatchPair file_pair(TaskFiles& tasks, const fs::path& task, const fs::path& solution, SolutionMode mode) {
  EvalBatchPair p;
  p.task_ref = task.string();
  p.solution_ref = solution.string();
  p.label = task.filename().string() + " " + solution.filename().string();
  p.task = tasks.get(task, &p.error);
  if (p.error.empty()) {
    try {
      p.solution = load_solution(solution, mode);
    } catch (const InputError& e) {
      p.error = e.what();
    }
  }
  finish_pair(&p);
  return p;
}

void check_count(const std::vector<EvalBatchPair>& pairs, const fs::path& input) {
  if (pairs.size() >= kMaxBatchPairs) {
    throw InputError(input.string() + ": more than " + std::to_string(kMaxBatchPairs) +
                     " pairs; split the batch into several runs (each resumable)");
  }
}

std::vector<EvalBatchPair> folder_pairs(const EvalBatchOptions& a, SolutionMode mode) {
  if (a.task.empty()) {
    throw InputError("--solutions " + a.solutions.string() +
                     " is a folder: give the task its solutions are for with "
                     "--task (or list task/solution pairs in a list file or a .jsonl file)");
  }
  // The task file and the results file may live in the folder too (a
  // KernelBench-style layout: DIR/task.json beside DIR/*.cu): neither is a
  // solution.
  auto same_file = [](const fs::path& file, const fs::path& other) {
    std::error_code ec;
    return !other.empty() && fs::equivalent(file, other, ec) && !ec;
  };
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(a.solutions)) {
    if (!e.is_regular_file() || e.path().filename().string().front() == '.') continue;
    if (same_file(e.path(), a.task) || same_file(e.path(), a.results)) continue;
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  TaskFiles tasks;
  std::vector<EvalBatchPair> pairs;
  for (const auto& f : files) {
    check_count(pairs, a.solutions);
    pairs.push_back(file_pair(tasks, a.task, f, mode));
  }
  return pairs;
}

// Lines "TASK SOLUTION", or "SOLUTION" with --task; paths relative to the
// list file; blank lines and lines starting with # are skipped.
std::vector<EvalBatchPair> list_pairs(const EvalBatchOptions& a, SolutionMode mode) {
  std::ifstream in(a.solutions);
  if (!in) throw InputError(a.solutions.string() + ": cannot read the list file");
  const fs::path base = a.solutions.parent_path();
  auto resolve = [&](const std::string& p) { return fs::path(p).is_absolute() ? fs::path(p) : base / p; };
  TaskFiles tasks;
  std::vector<EvalBatchPair> pairs;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = a.solutions.string() + ":" + std::to_string(number);
    if (line.size() > kMaxListLineBytes) {
      throw InputError(where + ": line longer than " + std::to_string(kMaxListLineBytes) +
                       " bytes (expected \"TASK SOLUTION\" or \"SOLUTION\" paths)");
    }
    std::vector<std::string> words;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      size_t j = i;
      while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
      if (j > i) words.push_back(line.substr(i, j - i));
      i = j;
    }
    if (words.empty() || words[0][0] == '#') continue;
    check_count(pairs, a.solutions);
    if (words.size() == 1 && !a.task.empty()) {
      pairs.push_back(file_pair(tasks, a.task, resolve(words[0]), mode));
    } else if (words.size() == 2) {
      pairs.push_back(file_pair(tasks, resolve(words[0]), resolve(words[1]), mode));
    } else {
      throw InputError(where + ": expected \"TASK SOLUTION\" (two paths)" +
                       std::string(a.task.empty() ? "" : " or \"SOLUTION\" (the task is --task)") + ", got " +
                       std::to_string(words.size()) + " words (paths with spaces: use a .jsonl file)");
    }
  }
  return pairs;
}

// {"task": path | task object, "solution": path | solution object, "id"?}
std::vector<EvalBatchPair> jsonl_pairs(const EvalBatchOptions& a, SolutionMode mode) {
  const fs::path base = a.solutions.parent_path();
  auto resolve = [&](const std::string& p) { return fs::path(p).is_absolute() ? fs::path(p) : base / p; };
  TaskFiles tasks;
  std::vector<EvalBatchPair> pairs;
  JsonlReadOptions options;
  options.max_line_bytes = 16u << 20;  // a task and a solution inline
  for_each_jsonl_line(
      a.solutions,
      [&](const Document& doc, size_t line) {
        check_count(pairs, a.solutions);
        EvalBatchPair p;
        p.label = a.solutions.filename().string() + ":" + std::to_string(line);
        try {
          ObjectReader r = doc.root_object();
          if (auto f = r.optional("id")) p.label = f->as_string();
          Field task = r.required("task");
          if (task.value().is_string()) {
            p.task_ref = resolve(task.as_string()).string();
            p.task = tasks.get(p.task_ref, &p.error);
          } else {
            p.task_ref = doc.source + " (inline)";
            p.task = parse_task(Document::from_value(task.value(), doc.source + ": task"));
          }
          Field solution = r.required("solution");
          if (p.error.empty()) {
            if (solution.value().is_string()) {
              p.solution_ref = resolve(solution.as_string()).string();
              p.solution = load_solution(p.solution_ref, mode);
            } else {
              p.solution_ref = doc.source + " (inline)";
              p.solution = parse_solution(Document::from_value(solution.value(), doc.source));
            }
          }
          r.finish();
        } catch (const InputError& e) {
          p.error = e.what();
        }
        finish_pair(&p);
        pairs.push_back(std::move(p));
      },
      options);
  return pairs;
}

// Rows of an earlier run, by key (the last line of a key wins). A torn last
// line (a killed run) is skipped; it is evaluated again.
std::map<std::string, json> read_results(const fs::path& path) {
  std::map<std::string, json> rows;
  std::error_code ec;
  if (!fs::exists(path, ec)) return rows;
  JsonlReadOptions options;
  options.allow_torn_tail = true;
  for_each_jsonl_line(
      path,
      [&](const Document& doc, size_t line) {
        const json& row = doc.root;
        if (!row.is_object() || !row.contains("key") || !row["key"].is_string()) {
          throw InputError(path.string() + ":" + std::to_string(line) +
                           ": not a kforge eval result (no \"key\"); give --results a file of its own");
        }
        rows[row["key"].get<std::string>()] = row;
      },
      options);
  return rows;
}

// A run killed mid-write leaves a last line without its newline. It is cut
// off before appending: written after it, the next row would join it into
// one line that no reader can parse.
void drop_torn_tail(const fs::path& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size == 0) return;
  std::ifstream in(path, std::ios::binary);
  char last = 0;
  in.seekg(static_cast<std::streamoff>(size - 1));
  if (!in.get(last) || last == '\n') return;
  // Back to the last newline, a chunk at a time.
  constexpr uintmax_t kChunk = 1 << 16;
  uintmax_t keep = size;
  std::string buf;
  while (keep > 0) {
    const uintmax_t from = keep > kChunk ? keep - kChunk : 0;
    buf.resize(static_cast<size_t>(keep - from));
    in.seekg(static_cast<std::streamoff>(from));
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const size_t nl = buf.rfind('\n');
    keep = nl == std::string::npos ? from : from + nl + 1;
    if (nl != std::string::npos) break;
  }
  in.close();
  fs::resize_file(path, keep, ec);
  if (ec) throw SystemError(path.string() + ": cannot cut off its torn last line: " + ec.message());
}

json base_row(const EvalBatchPair& p) {
  json row = {{"key", p.key}, {"label", p.label}, {"task", p.task_ref}, {"solution", p.solution_ref}};
  if (p.task) row["task_id"] = p.task->id;
  if (p.solution) row["mode"] = solution_mode_name(p.solution->mode);
  return row;
}

json input_error_row(const EvalBatchPair& p, const std::string& verdict, const std::string& error) {
  json row = base_row(p);
  row["verdict"] = verdict;
  row["error"] = error;
  row["system_error"] = false;
  row["evaluated"] = false;
  return row;
}

json result_row(const EvalBatchPair& p, const StepResult& step) {
  json row = base_row(p);
  const StepInfo& info = step.info;
  const bool system_error = info.system_error();
  row["verdict"] = step_verdict(info);
  row["reward"] = step.reward;
  row["system_error"] = system_error;
  row["evaluated"] = !system_error;
  const Measurement& m = info.measurement;
  row["speedup"] = m.speedup_eager ? json(*m.speedup_eager) : json(nullptr);
  row["measurement"] = to_json(m);
  if (info.eval_report) {
    row["summary"] = info.eval_report->summary;
    row["device"] = info.eval_report->device;
    row["eval_phases_ms"] = info.eval_report->phase_ms;
    // Why timing stopped (`decided`: once the reward was; `converged`: at
    // target_rse; a cap), so a speedup is read with the precision it has.
    if (info.eval_report->timing) row["stop_reason"] = info.eval_report->timing->stop_reason;
  }
  if (info.error) row["error"] = info.error->message;
  row["timings"] = to_json(info.timings);
  return row;
}

json summarize_rows(const std::vector<json>& rows, size_t evaluated_now, size_t from_earlier, double seconds,
                    double judging_seconds, const fs::path& results) {
  std::map<std::string, int> verdicts;
  std::vector<double> speedups;
  int incomplete = 0;
  json best = nullptr;
  for (const auto& r : rows) {
    ++verdicts[r.value("verdict", std::string("?"))];
    incomplete += !r.value("evaluated", false);
    if (r.value("verdict", std::string()) == "correct" && r.contains("speedup") && r["speedup"].is_number()) {
      const double s = r["speedup"].get<double>();
      speedups.push_back(s);
      if (best.is_null() || s > best["speedup"].get<double>()) best = {{"speedup", s}, {"label", r["label"]}};
    }
  }
  json out = {{"pairs", rows.size()},
              {"evaluated_now", evaluated_now},
              {"from_earlier_results", from_earlier},
              {"not_evaluated", incomplete},
              {"verdicts", verdicts},
              {"seconds", seconds},
              {"judging_seconds", judging_seconds},
              {"results", results.string()}};
  if (!speedups.empty()) {
    std::sort(speedups.begin(), speedups.end());
    double log_sum = 0;
    for (double s : speedups) log_sum += std::log(std::max(s, 1e-12));
    out["speedup"] = {
        {"correct_timed", speedups.size()},
        {"median", speedups[speedups.size() / 2]},
        {"geomean", std::exp(log_sum / static_cast<double>(speedups.size()))},
        {"best", best},
        {"faster_than_eager", std::count_if(speedups.begin(), speedups.end(), [](double s) { return s > 1.0; })}};
  }
  return out;
}

}  // namespace

std::vector<EvalBatchPair> read_batch_pairs(const EvalBatchOptions& a, SolutionMode mode) {
  std::error_code ec;
  if (fs::is_directory(a.solutions, ec)) return folder_pairs(a, mode);
  if (!fs::is_regular_file(a.solutions, ec)) {
    throw InputError(a.solutions.string() +
                     ": no such file or folder (--solutions takes a folder of solutions for --task, a list file of "
                     "\"TASK SOLUTION\" lines, or a .jsonl file of {\"task\", \"solution\"} objects)");
  }
  if (a.solutions.extension() == ".jsonl") return jsonl_pairs(a, mode);
  return list_pairs(a, mode);
}

namespace {

// Every distinct pair of the input: its row from an earlier run (one that
// was not a system error), or a place in the to-do list.
struct Partition {
  std::map<std::string, json> rows;
  std::vector<EvalBatchPair*> todo;
  size_t from_earlier = 0;
};

Partition partition_pairs(std::vector<EvalBatchPair>& pairs, const std::map<std::string, json>& earlier) {
  Partition part;
  std::set<std::string> seen;
  for (auto& p : pairs) {
    if (!seen.insert(p.key).second) continue;  // the same content listed twice is evaluated once
    auto it = earlier.find(p.key);
    if (it != earlier.end() && !it->second.value("system_error", false)) {
      part.rows[p.key] = it->second;
      ++part.from_earlier;
    } else {
      part.todo.push_back(&p);
    }
  }
  return part;
}

// Each runnable pair as the submit step of an episode of an EnvPool, as many
// at once as the pool has envs; every result goes to `record`. Returns the
// seconds from the first request the judges were ready for to the last
// report: what the batch held the devices for, without process start-up.
double judge_pairs(const std::vector<EvalBatchPair*>& runnable, const EnvConfig& config, int requested_concurrency,
                   std::optional<Clock::time_point> stop_starting, const std::function<void(json)>& record,
                   size_t* evaluated_now) {
  std::shared_ptr<Executor> executor = make_executor(executor_config(config));
  executor->device_name();  // the judges start (libtorch, CUDA context) before the clock
  const auto judging_start = Clock::now();
  // The reference checks of every distinct task, queued at once across the
  // pool's lanes, so that feeding episodes does not wait for them one by one.
  std::map<std::string, std::shared_future<ReferenceReport>> checks;
  for (EvalBatchPair* p : runnable) {
    const std::string id = sha256_hex(to_json(*p->task).dump());
    if (!checks.count(id)) checks.emplace(id, executor->check_task(*p->task, config.eval));
  }
  const int per_device = config.placement.episodes_per_device * placed_device_count(config);
  const int concurrency = std::max(1, std::min<int>(requested_concurrency > 0 ? requested_concurrency : per_device,
                                                    static_cast<int>(runnable.size())));
  EnvPool pool(config, concurrency, {nullptr, executor});
  std::map<int, EvalBatchPair*> in_flight;
  size_t next = 0;
  auto start_next = [&](int env_id) {
    while (next < runnable.size()) {
      if (stop_starting && Clock::now() >= *stop_starting) return;
      EvalBatchPair* p = runnable[next++];
      ResetOptions options;
      options.reference_check = checks.at(sha256_hex(to_json(*p->task).dump()));
      try {
        pool.reset(env_id, *p->task, 0, options);
      } catch (const InputError& e) {
        record(input_error_row(*p, "invalid task", e.what()));
        continue;
      }
      Action submit;
      submit.type = ActionType::kSubmit;
      submit.solution = *p->solution;
      pool.send({submit}, {env_id});
      in_flight[env_id] = p;
      return;
    }
  };
  for (int e = 0; e < concurrency; ++e) start_next(e);
  while (!in_flight.empty()) {
    for (auto& r : pool.recv(1)) {
      EvalBatchPair* p = in_flight.at(r.env_id);
      in_flight.erase(r.env_id);
      json row = result_row(*p, r.result);
      *evaluated_now += row.value("evaluated", false);
      record(std::move(row));
      start_next(r.env_id);
    }
  }
  return std::chrono::duration<double>(Clock::now() - judging_start).count();
}

}  // namespace

EvalBatchResult run_eval_batch(const EvalBatchOptions& a, const EnvConfig& config, const EvalBatchObserver& observer) {
  const auto start = Clock::now();
  std::vector<EvalBatchPair> pairs = read_batch_pairs(a, config.default_mode);
  if (pairs.empty()) throw InputError(a.solutions.string() + ": no task/solution pairs found");
  // Every pair of this input ends with one row, an earlier one or a new one,
  // unless the time limit came before it was started.
  Partition part = partition_pairs(pairs, read_results(a.results));

  drop_torn_tail(a.results);
  JsonlWriter out(a.results, JsonlWriter::Mode::kAppend);
  if (observer.on_start) observer.on_start(part.todo.size());
  size_t evaluated_now = 0;
  const std::function<void(json)> record = [&](json row) {
    out.write(row);
    if (observer.on_row) observer.on_row(row);
    // The key first: json's operator= takes its argument by value, and C++17
    // initializes that argument (moving row out) before the left side.
    const std::string key = row["key"].get<std::string>();
    part.rows[key] = std::move(row);
  };
  std::vector<EvalBatchPair*> runnable;
  for (EvalBatchPair* p : part.todo) {
    if (p->error.empty()) {
      runnable.push_back(p);
    } else {
      record(input_error_row(*p, "bad input", p->error));
    }
  }
  std::optional<Clock::time_point> stop_starting;
  if (a.time_limit_s > 0) {
    stop_starting = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.time_limit_s));
  }
  const bool out_of_time = stop_starting && Clock::now() >= *stop_starting;
  const double judging_seconds = runnable.empty() || out_of_time ? 0.0
                                                                 : judge_pairs(runnable, config, a.concurrency,
                                                                               stop_starting, record, &evaluated_now);

  EvalBatchResult result;
  std::set<std::string> seen;
  size_t not_started = 0;
  for (const auto& p : pairs) {
    if (!seen.insert(p.key).second) continue;
    auto it = part.rows.find(p.key);
    if (it == part.rows.end()) {
      ++not_started;  // left by the time limit
      continue;
    }
    result.rows.push_back(it->second);
  }
  result.evaluated_now = evaluated_now;
  result.from_earlier = part.from_earlier;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.summary = summarize_rows(result.rows, evaluated_now, part.from_earlier, seconds, judging_seconds, a.results);
  result.summary["not_started"] = not_started;
  return result;
}

}  // namespace kforge::env
