#include "kforge/data_synth/synthesizer.h"

#include <ATen/Parallel.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>

#include "kforge/core/jsonl.h"
#include "kforge/data_synth/device_memory.h"
#include "kforge/data_synth/graph_hash.h"
#include "kforge/data_synth/rng.h"
#include "kforge/data_synth/roofline.h"
#include "kforge/data_synth/splits.h"

namespace kforge::synth {
namespace fs = std::filesystem;

namespace {

// The outcome of one slot's run of attempts in a worker.
struct SlotResult {
  int64_t slot = 0;
  int attempt = 0;  // the accepted attempt
  TaskSpec task;
  std::string graph_hash;
  json record;                                // slots.jsonl line (without rejections)
  std::map<std::string, int64_t> rejections;  // of the attempts this worker ran
  bool exhausted = false;
  std::string last_rejection;
  int judge_retries = 0;  // system errors of the judge retried, over every attempt of the slot
};

// An attempt's sampled task on its way through the checks; `reason` names
// the first check that rejected it (empty while none has).
struct Candidate {
  std::optional<SampledShapes> shapes;
  double headroom = 0;
  NearestProblem nearest;
  std::string hash;
  FilterVerdict verdict;
  std::string reason, detail;
};

// Where an accepted attempt's time went, for its slots.jsonl record.
struct AttemptSeconds {
  double filter_s = 0;
  double baseline_s = 0;
};

struct Job {
  int64_t slot = 0;
  int first_attempt = 0;
};

// The prefix under which a slot's contamination rejections are counted by
// relation, beside the reasons.
constexpr char kContaminatedBy[] = "contaminated_by:";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

json SynthConfig::identity() const {
  return {{"seed", std::to_string(seed)},
          {"backend", backend},
          {"window_ms", {shapes.window.lo_ms, shapes.window.hi_ms}},
          {"margin", shapes.margin},
          {"measured_far_outside", filter.far_outside},
          {"min_headroom", shapes.min_headroom},
          {"max_atol_scale", filter.max_atol_scale},
          {"memory_cap_bytes", shapes.memory_cap_bytes},
          {"variants", shapes.variants},
          {"op_count_weights", compose.op_count_weights},
          {"main_loop_share", compose.main_loop_share},
          {"float16_share", compose.float16_share},
          {"bfloat16_share", compose.bfloat16_share},
          {"contamination_threshold", contamination_threshold},
          {"headroom_range", headroom_range.empty() ? json(nullptr) : json(headroom_range)},
          {"format", kSynthFormat}};
}

size_t truncate_torn_tail(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size == 0) return 0;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw SystemError(path.string() + ": cannot open to repair a torn last line");
  // Scan backwards for the last newline, a block at a time.
  off_t end = static_cast<off_t>(size);
  off_t keep = 0;
  char buf[4096];
  while (end > 0) {
    const off_t start = std::max<off_t>(0, end - static_cast<off_t>(sizeof(buf)));
    const ssize_t got = ::pread(fd, buf, static_cast<size_t>(end - start), start);
    if (got <= 0) break;
    for (ssize_t i = got - 1; i >= 0; --i) {
      if (buf[i] == '\n') {
        keep = start + i + 1;
        end = 0;
        break;
      }
    }
    if (end != 0) end = start;
  }
  const size_t removed = size - static_cast<size_t>(keep);
  if (removed > 0 && ::ftruncate(fd, keep) != 0) {
    ::close(fd);
    throw SystemError(path.string() + ": cannot cut off a torn last line");
  }
  ::close(fd);
  return removed;
}

namespace {

class Run {
 public:
  Run(const SynthConfig& config, const fs::path& out, const BaselineFn& baseline, const ProgressFn& progress)
      : c_(config), out_(out), baseline_(baseline), progress_(progress) {}

  SynthProgress go() {
    prepare_out_dir();
    signatures_ = KernelBenchSignatures::load(c_.signatures.empty() ? default_signature_path() : c_.signatures);
    resume();
    filter_ = c_.filter;
    if (c_.backend == "cuda") {
      filter_.device = at::Device(at::kCUDA, 0);
      filter_.device_lock = &device_lock_;
      prepare_device(filter_.device);
    } else {
      filter_.device = at::Device(at::kCPU);
      // One ATen thread per worker: the judge times the CPU reference on one
      // thread, and the workers use the cores.
      at::set_num_threads(1);
    }
    filter_.window = c_.shapes.window;
    profile_ = c_.backend == "cuda" ? &cuda_profile() : &cpu_profile();
    progress_state_.target = c_.n;
    progress_state_.accepted = next_commit_;
    progress_state_.resumed = next_commit_;
    if (next_commit_ >= c_.n) {
      progress_state_.done = true;
      if (progress_) progress_(progress_state_);
      return progress_state_;
    }
    for (int64_t s = next_commit_; s < c_.n; ++s) jobs_.push_back({s, 0});
    tasks_ = std::make_unique<JsonlWriter>(out_ / "tasks.jsonl", JsonlWriter::Mode::kAppend);
    slots_ = std::make_unique<JsonlWriter>(out_ / "slots.jsonl", JsonlWriter::Mode::kAppend);

    const int workers = c_.workers > 0 ? c_.workers : std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> threads;
    for (int i = 0; i < workers; ++i) threads.emplace_back([this] { worker(); });
    std::thread reporter([this] { report_loop(); });
    for (auto& t : threads) t.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
    }
    cv_.notify_all();
    reporter.join();
    if (!fatal_.empty()) throw SystemError(fatal_);
    progress_state_.done = next_commit_ >= c_.n;
    progress_state_.cancelled = !progress_state_.done;
    progress_state_.elapsed_s = seconds_since(start_);
    if (progress_) progress_(progress_state_);
    return progress_state_;
  }

 private:
  void prepare_out_dir() {
    fs::create_directories(out_);
    const fs::path run_file = out_ / "run.json";
    const json identity = c_.identity();
    if (fs::exists(run_file)) {
      const Document doc = Document::from_file(run_file);
      if (doc.root != identity) {
        const json format = doc.root.is_object() ? doc.root.value("format", json()) : json();
        if (format != identity["format"]) {
          // Another format: the same seed gives other tasks (kforge-synth/3:
          // tolerances scaled to the outputs' magnitude, eq/ne/log reached),
          // so continuing the folder would mix two sets.
          throw InputError(run_file.string() + ": " + out_.string() + " was written by " +
                           (format.is_string() ? format.get<std::string>() : std::string("an unknown format")) +
                           ", this synthesizer writes " + kSynthFormat +
                           ": a folder of another format is refused, not resumed (the same seed gives other tasks); "
                           "choose another --out");
        }
        throw InputError(run_file.string() + ": " + out_.string() + " holds a synthesis run with other options (" +
                         doc.root.dump() +
                         "); resume it with the same --seed/--backend/options or choose another --out");
      }
    } else {
      std::ofstream f(run_file.string() + ".tmp");
      f << identity.dump(2) << "\n";
      f.close();
      fs::rename(run_file.string() + ".tmp", run_file);
    }
  }

  // Reads what an earlier run committed: tasks.jsonl is the truth, slots.jsonl
  // is cut to the same slots.
  void resume() {
    const fs::path tasks = out_ / "tasks.jsonl", slots = out_ / "slots.jsonl";
    if (fs::exists(tasks)) {
      truncate_torn_tail(tasks);
      JsonlReadOptions ro;
      for_each_jsonl_line(
          tasks,
          [&](const Document& doc, size_t) {
            TaskSpec t = parse_task(doc);
            committed_.insert(t.meta.at("synth").at("graph_hash").get<std::string>());
            ++next_commit_;
          },
          ro);
    }
    if (fs::exists(slots)) {
      truncate_torn_tail(slots);
      std::vector<std::string> keep;
      std::set<int64_t> seen;
      for_each_jsonl_line(slots, [&](const Document& doc, size_t) {
        const int64_t s = doc.root.value("slot", int64_t{-1});
        if (s >= 0 && s < next_commit_ && seen.insert(s).second) keep.push_back(doc.root.dump());
      });
      const fs::path tmp = slots.string() + ".tmp";
      {
        std::ofstream f(tmp);
        for (const auto& line : keep) f << line << "\n";
      }
      fs::rename(tmp, slots);
    }
  }

  // Runs attempts of `job` until one passes the filters (or the slot is
  // exhausted). Returns the result for the committer.
  SlotResult attempt_slot(const Job& job) {
    SlotResult r;
    r.slot = job.slot;
    for (int k = job.first_attempt; k < c_.max_attempts_per_slot; ++k) {
      if (stopping()) break;
      const uint64_t seed = derive_seed(c_.seed, {static_cast<uint64_t>(job.slot), static_cast<uint64_t>(k)});
      const auto t0 = std::chrono::steady_clock::now();
      count_attempt();
      Candidate candidate = screen_attempt(seed);
      if (!candidate.reason.empty()) {
        // Which rule rejected it (equal, contains, edit, dominant, pointwise,
        // subgraph): the card counts them under the reason.
        if (candidate.reason == "contaminated") ++r.rejections[kContaminatedBy + candidate.nearest.relation];
        reject_attempt(r, candidate.reason, candidate.detail);
        continue;
      }
      const double filter_s = seconds_since(t0);
      TaskSpec task = describe_task(candidate, job.slot, k);
      const auto b0 = std::chrono::steady_clock::now();
      int retries = 0;
      const BaselineResult base = judge_exclusively(task, &retries);
      r.judge_retries += retries;
      // Stopped meanwhile (the judge may have been interrupted with us): this
      // attempt's outcome is not trusted; a rerun redoes the slot.
      if (stopping()) break;
      const auto [reason, detail] = judge_rejection(base);
      if (!reason.empty()) {
        reject_attempt(r, reason, detail);
        continue;
      }
      accept_attempt(r, std::move(task), candidate, base, k, {filter_s, seconds_since(b0)});
      return r;
    }
    r.exhausted = !stopping();
    return r;
  }

  // Samples an attempt's graph and shapes and runs the checks on it, the
  // cheapest first: the predicted headroom, contamination and duplicates, then
  // the filters. Stops at the first check that rejects it.
  Candidate screen_attempt(uint64_t seed) {
    Candidate c = sample_candidate(seed);
    if (c.reason.empty()) check_headroom(c);
    if (c.reason.empty()) check_novelty(c);
    if (c.reason.empty()) check_filters(c);
    return c;
  }

  Candidate sample_candidate(uint64_t seed) const {
    Candidate c;
    try {
      auto sampled = sample_shapes(seed, c_.compose, c_.shapes, *profile_);
      if (auto* rej = std::get_if<ShapeRejection>(&sampled)) {
        c.reason = rej->reason;
        c.detail = rej->detail;
      } else {
        c.shapes = std::move(std::get<SampledShapes>(sampled));
      }
    } catch (const InputError& e) {
      c.reason = "compose_invalid";
      c.detail = e.what();
    }
    return c;
  }

  void check_headroom(Candidate& c) const {
    c.headroom = predicted_headroom(c.shapes->task, *profile_, c_.backend);
    if (!c_.headroom_range.empty() && (c.headroom < c_.headroom_range[0] || c.headroom > c_.headroom_range[1])) {
      c.reason = "headroom_range";
      c.detail = "predicted headroom " + std::to_string(c.headroom) + " outside the range asked for";
    }
  }

  // Too near a KernelBench problem, or a graph already committed.
  void check_novelty(Candidate& c) {
    c.nearest = signatures_.judge(c.shapes->task, *profile_);
    c.hash = canonical_graph_hash(c.shapes->task);
    if (!c.nearest.problem.empty() && c.nearest.distance <= c_.contamination_threshold) {
      c.reason = "contaminated";
      c.detail = c.nearest.problem + " at distance " + std::to_string(c.nearest.distance);
    } else if (is_committed(c.hash)) {
      c.reason = "duplicate";
    }
  }

  void check_filters(Candidate& c) const {
    c.verdict = run_filters(c.shapes->task, filter_);
    if (!c.verdict.passed) {
      c.reason = c.verdict.reason;
      c.detail = c.verdict.detail;
    }
  }

  void reject_attempt(SlotResult& r, const std::string& reason, const std::string& detail) {
    ++r.rejections[reason];
    r.last_rejection = reason + (detail.empty() ? "" : ": " + detail);
    count_rejection(reason);
  }

  // The task of a screened candidate, named by its graph hash, with the
  // synthesis facts in its meta. Takes the candidate's task.
  TaskSpec describe_task(Candidate& c, int64_t slot, int attempt) const {
    TaskSpec task = std::move(c.shapes->task);
    // The tolerance the filters applied: scaled to the outputs' magnitude.
    task.tolerance = c.verdict.tolerance;
    task.id = "synth/" + c.hash.substr(0, 16);
    task.description = "Synthesized graph: " + c.shapes->pattern;
    task.meta = {{"synth",
                  {{"seed", std::to_string(c_.seed)},
                   {"slot", slot},
                   {"attempt", attempt},
                   {"pattern", c.shapes->pattern},
                   {"graph_hash", c.hash},
                   {"batch", c.shapes->batch},
                   {"predicted_ms", c.shapes->predicted_ms},
                   {"atol_scale", c.verdict.atol_scale},
                   {"backend", c_.backend}}},
                 {"nearest_kernelbench", c.nearest.to_json()}};
    return task;
  }

  // The judge's baseline for `task`, asked with the device held.
  BaselineResult judge_exclusively(const TaskSpec& task, int* retries) {
    if (!baseline_) {
      BaselineResult base;
      base.error = "no baseline callback";
      return base;
    }
    // On a GPU the judge times the reference in its own process: hold
    // the device exclusively, as the in-process timing does, so that no
    // other slot's filter work runs on it meanwhile.
    std::unique_lock<std::shared_mutex> exclusive;
    if (filter_.device_lock) exclusive = std::unique_lock<std::shared_mutex>(*filter_.device_lock);
    // What this process's allocator keeps cached is memory the judge,
    // another process, cannot have.
    release_cached_device_memory(filter_.device);
    return judge(task, retries);
  }

  // The reason and detail with which the judge's answer rejects the attempt;
  // an empty reason when it does not.
  std::pair<std::string, std::string> judge_rejection(const BaselineResult& base) const {
    if (baseline_ && !base.error.empty() && base.invalid.empty()) {
      // A task is committed only with the judge's check behind it: a
      // system error that outlived its retries rejects the attempt, and
      // the slot moves on (a system error is never a verdict:
      // docs/architecture.md#blame).
      return {"judge_error", base.error};
    }
    // The judge's own reference check refused what the filters passed:
    // the judge decides, the attempt is rejected.
    if (!base.invalid.empty()) return {"judge_check", base.invalid};
    return {};
  }

  // Labels the accepted task and writes its slots.jsonl record into `r`.
  void accept_attempt(SlotResult& r, TaskSpec task, const Candidate& c, const BaselineResult& base, int attempt,
                      const AttemptSeconds& seconds) const {
    if (base.eager_ms) {
      task.baselines = Baselines{base.device, base.eager_ms, std::nullopt};
    }
    // Labels a trainer selects by: the difficulty (measured eager time
    // against the roofline of the device it was measured on) and the
    // op-graph family the split keeps whole.
    task.meta["difficulty"] = difficulty_label(task, c_.backend, c.headroom);
    task.meta["family"] = family_name(family_core(task));
    r.attempt = attempt;
    r.graph_hash = c.hash;
    r.record = {{"slot", r.slot},
                {"task_id", task.id},
                {"attempt", attempt},
                {"pattern", c.shapes->pattern},
                {"ops", task.nodes.size()},
                {"dtype", dtype_name(task.inputs.front().dtype)},
                {"predicted_ms", c.shapes->predicted_ms},
                {"measured_ms", c.verdict.eager_ms},
                {"measured_in_window", c.verdict.measured_in_window},
                {"bytes", c.shapes->bytes},
                {"filter_s", seconds.filter_s},
                {"baseline_s", seconds.baseline_s},
                {"baseline", base.eager_ms ? json(*base.eager_ms) : json(nullptr)},
                {"baseline_device", base.device},
                {"baseline_error", base.error},
                {"baseline_detail", base.detail},
                {"judge_retries", r.judge_retries}};
    r.task = std::move(task);
  }

  // The judge's answer for `task`: a system error (an answer that is neither
  // a verdict nor a timing) is asked again, up to c_.judge_retries times.
  BaselineResult judge(const TaskSpec& task, int* retries) {
    for (;;) {
      BaselineResult base;
      try {
        base = baseline_(task);
      } catch (const std::exception& e) {
        base.error = e.what();
      }
      if (base.error.empty() || !base.invalid.empty() || *retries >= c_.judge_retries || stopping()) return base;
      ++*retries;
      count_judge_retry();
    }
  }

  void worker() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !jobs_.empty() || stop_.load() || next_commit_ >= c_.n; });
        if (stopping() || next_commit_ >= c_.n) return;
        job = jobs_.front();
        jobs_.pop_front();
      }
      SlotResult r = attempt_slot(job);
      std::unique_lock<std::mutex> lock(mu_);
      if (r.exhausted) {
        fatal_ = "slot " + std::to_string(r.slot) + " rejected " + std::to_string(c_.max_attempts_per_slot) +
                 " attempts in a row (last: " + r.last_rejection +
                 "); the options cannot produce tasks (check the runtime window and memory cap)";
        stop_ = true;
        cv_.notify_all();
        return;
      }
      if (stopping()) return;
      for (const auto& [k, v] : r.rejections) pending_rejections_[r.slot][k] += v;
      ready_[r.slot] = std::move(r);
      commit_ready();
      cv_.notify_all();
    }
  }

  // Commits results in slot order (mu_ held). A duplicate of a slot committed
  // meanwhile sends its slot back to the queue at the next attempt.
  void commit_ready() {
    while (!ready_.empty() && ready_.begin()->first == next_commit_) {
      SlotResult r = std::move(ready_.begin()->second);
      ready_.erase(ready_.begin());
      if (committed_.count(r.graph_hash)) {
        ++pending_rejections_[r.slot]["duplicate"];
        ++progress_state_.rejections["duplicate"];
        ++progress_state_.rejected;
        jobs_.push_front({r.slot, r.attempt + 1});
        return;
      }
      json record = r.record;
      json rejections = json::object(), contaminated_by = json::object();
      for (const auto& [k, v] : pending_rejections_[r.slot]) {
        if (k.rfind(kContaminatedBy, 0) == 0) {
          contaminated_by[k.substr(sizeof(kContaminatedBy) - 1)] = v;
        } else {
          rejections[k] = v;
        }
      }
      record["rejections"] = rejections;
      record["contaminated_by"] = contaminated_by;
      pending_rejections_.erase(r.slot);
      slots_->write(record);
      tasks_->write(to_json(r.task));
      committed_.insert(r.graph_hash);
      ++next_commit_;
      ++progress_state_.accepted;
    }
  }

  // Asked to stop: a fatal error, or SynthConfig::cancel.
  bool stopping() const { return stop_.load() || (c_.cancel && c_.cancel->load()); }

  bool is_committed(const std::string& hash) {
    std::lock_guard<std::mutex> lock(mu_);
    return committed_.count(hash) > 0;
  }

  void count_attempt() {
    std::lock_guard<std::mutex> lock(mu_);
    ++progress_state_.attempts;
  }

  void count_judge_retry() {
    std::lock_guard<std::mutex> lock(mu_);
    ++progress_state_.judge_retries;
  }

  void count_rejection(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    ++progress_state_.rejections[reason];
    ++progress_state_.rejected;
  }

  void report_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!finished_) {
      cv_.wait_for(lock, std::chrono::milliseconds(200));
      if (finished_) break;
      if (c_.cancel && c_.cancel->load() && !stop_.load()) {
        stop_ = true;  // workers finish their attempt in flight and commit nothing more
        cv_.notify_all();
      }
      progress_state_.elapsed_s = seconds_since(start_);
      SynthProgress snapshot = progress_state_;
      lock.unlock();
      if (progress_) progress_(snapshot);
      lock.lock();
    }
  }

  const SynthConfig& c_;
  fs::path out_;
  const BaselineFn& baseline_;
  const ProgressFn& progress_;
  KernelBenchSignatures signatures_;
  FilterOptions filter_;
  const DeviceProfile* profile_ = nullptr;
  std::shared_mutex device_lock_;
  std::unique_ptr<JsonlWriter> tasks_, slots_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  std::map<int64_t, SlotResult> ready_;
  std::map<int64_t, std::map<std::string, int64_t>> pending_rejections_;
  std::set<std::string> committed_;
  int64_t next_commit_ = 0;
  std::atomic<bool> stop_{false};
  bool finished_ = false;
  std::string fatal_;
  SynthProgress progress_state_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

SynthProgress synthesize(const SynthConfig& config, const fs::path& out_dir, const BaselineFn& baseline,
                         const ProgressFn& progress) {
  Run run(config, out_dir, baseline, progress);
  return run.go();
}

}  // namespace kforge::synth
