#include "kforge/rollout/replay/reevaluation.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <sstream>

#include "kforge/core/action.h"
#include "kforge/core/error.h"
#include "kforge/core/measurement.h"
#include "kforge/env/env_pool.h"
#include "kforge/env/step_info.h"
#include "kforge/reward/reward.h"
#include "kforge/rollout/replay/replay_summary.h"
#include "text_table.h"

namespace kforge::rollout::replay {
namespace {

struct Job {
  size_t row = 0;
  const RecordedEpisode* episode = nullptr;
  const TaskSpec* task = nullptr;
  Solution solution;
  int env_turn = 0;
  int compile_errors_so_far = -1;  // -1: as the fresh run counts them
  std::vector<double> exemplars;
  bool refused = false;  // the environment refused the task: no run of it can happen
  int system_errors = 0;
  std::string last_system_error;
};

bool mode_available(const std::vector<SolutionMode>& modes, SolutionMode m) {
  return std::find(modes.begin(), modes.end(), m) != modes.end();
}

std::string modes_text(const std::vector<SolutionMode>& modes) {
  std::string s;
  for (auto m : modes) s += (s.empty() ? "" : ", ") + solution_mode_name(m);
  return s;
}

std::string outcome_or_none(const std::string& o) { return o.empty() ? "not_run" : o; }

void append_note(ReevalRow* row, const std::string& text) { row->note += (row->note.empty() ? "" : "; ") + text; }
void prepend_note(ReevalRow* row, const std::string& text) {
  row->note = text + (row->note.empty() ? "" : "; " + row->note);
}

void decide(ReevalRow* row, const Job& job, const ReevalOptions& options) {
  if (row->rewards.empty()) {
    row->verdict = ReevalVerdict::kNotReevaluated;
    prepend_note(row, "the environment failed on every run: " + job.last_system_error);
    return;
  }
  std::map<std::string, int> counts;
  bool same = true;
  for (const auto& o : row->outcomes) {
    ++counts[o];
    same = same && o == outcome_or_none(row->recorded_outcome);
  }
  if (job.system_errors > 0) {
    append_note(row,
                std::to_string(job.system_errors) + " run(s) hit an environment failure: " + job.last_system_error);
  }
  if (!same) {
    row->verdict = ReevalVerdict::kOutcomeDiffers;
    std::string runs;
    for (const auto& [o, n] : counts) runs += (runs.empty() ? "" : ", ") + o + " x" + std::to_string(n);
    prepend_note(row, "recorded " + outcome_or_none(row->recorded_outcome) + "; runs: " + runs);
    return;
  }
  const auto [lo, hi] = std::minmax_element(row->rewards.begin(), row->rewards.end());
  const double rec = row->recorded_reward;
  const bool exact = std::all_of(row->rewards.begin(), row->rewards.end(),
                                 [&](double r) { return std::fabs(r - rec) <= 1e-9 * std::max(1.0, std::fabs(rec)); });
  const double tol = std::max(options.abs_tolerance, options.rel_tolerance * std::fabs(rec));
  if (exact) {
    row->verdict = ReevalVerdict::kExact;
  } else if (rec >= *lo - tol && rec <= *hi + tol) {
    row->verdict = ReevalVerdict::kWithinSpread;
  } else {
    row->verdict = ReevalVerdict::kDiffers;
    prepend_note(row, "recorded " + format_number(rec) + ", runs " + format_number(*lo) + " to " + format_number(*hi));
  }
}

}  // namespace

const std::string& reeval_verdict_name(ReevalVerdict v) {
  static const std::vector<std::string> kNames = {"exact", "within_spread", "differs", "outcome_differs",
                                                  "not_reevaluated"};
  return kNames.at(static_cast<size_t>(v));
}

double ReevalRow::spread() const {
  if (rewards.size() < 2) return 0.0;
  const auto [lo, hi] = std::minmax_element(rewards.begin(), rewards.end());
  return *hi - *lo;
}

namespace {

// The solution modes the configured backend runs.
std::vector<SolutionMode> backend_modes(const env::EnvConfig& config) {
  return config.backend == env::BackendKind::kCpu
             ? std::vector<SolutionMode>{SolutionMode::kCpp}
             : std::vector<SolutionMode>{SolutionMode::kCuda, SolutionMode::kNvrtc, SolutionMode::kTorchExt};
}

// The row of a recorded submit, before any rerun.
ReevalRow submit_row(const RecordedEpisode& e, const RecordedTurn& t) {
  ReevalRow row;
  row.trajectory_id = e.id;
  row.task_id = e.task_id;
  row.file = e.file;
  row.line = e.line;
  row.turn = t.index;
  row.seed = e.seed.value_or(0);
  row.recorded_outcome = t.outcome;
  row.recorded_speedup = t.speedup;
  row.recorded_reward = t.reward;
  return row;
}

Job rerun_job(size_t row, const RecordedEpisode& e, const RecordedTurn& t, const TaskSpec* task) {
  Job job;
  job.row = row;
  job.episode = &e;
  job.task = task;
  job.solution = *t.solution;
  job.env_turn = t.env_turn;
  if (t.step) job.compile_errors_so_far = t.step->measurement.compile_errors_so_far;
  job.exemplars = e.exemplar_speedups;
  return job;
}

// A row per recorded submit (up to options.max_submits) into `report`, and
// a job for each that can be rerun here; the others say in their note why not.
std::vector<Job> collect_jobs(const std::vector<RecordedEpisode>& episodes, const TaskLookup& tasks,
                              const ReevalOptions& options, const std::vector<SolutionMode>& modes,
                              ReevalReport* report) {
  std::vector<Job> jobs;
  const auto full = [&] { return options.max_submits > 0 && report->rows.size() >= options.max_submits; };
  for (const auto& e : episodes) {
    for (const auto& t : e.turns) {
      if (t.action != "submit") continue;
      if (full()) break;
      ReevalRow row = submit_row(e, t);
      const TaskSpec* task = tasks ? tasks(e) : nullptr;
      if (!t.solution) {
        row.note = "no solution recorded for this submit";
      } else if (task == nullptr) {
        row.note = "task " + e.task_id + " is unknown: pass its task set with --tasks";
      } else if (!mode_available(modes, t.solution->mode)) {
        row.note = "mode " + solution_mode_name(t.solution->mode) + " needs another backend (this one, " +
                   report->backend + ", runs " + modes_text(modes) + ")";
      } else {
        jobs.push_back(rerun_job(report->rows.size(), e, t, task));
        if (!e.seed) row.note = "no reset seed recorded: seed 0 used";
      }
      report->rows.push_back(std::move(row));
    }
    if (full()) break;
  }
  return jobs;
}

// Say so when the trajectories were recorded under another reward or on
// another backend: the comparison is then about different things.
void note_recording_differences(const std::vector<Job>& jobs, const reward::RewardFunction& reward_fn,
                                ReevalReport* report) {
  for (const Job& job : jobs) {
    ReevalRow& row = report->rows[job.row];
    const RecordedEpisode& e = *job.episode;
    std::string note;
    if (!e.recorded_reward.empty() && e.recorded_reward != reward_fn.name()) {
      note = "recorded with reward " + e.recorded_reward + ", re-scored with " + reward_fn.name() +
             " (pass the recording's --config or --reward)";
    }
    if (!e.recorded_backend.empty() && e.recorded_backend != report->backend) {
      note += (note.empty() ? "" : "; ") + std::string("recorded on the ") + e.recorded_backend + " backend";
    }
    if (!note.empty()) append_note(&row, note);
  }
}

// Runs every job options.repeats times over a pool of environments, as many
// at once as it has slots, and scores each run into the job's row.
class RunScheduler {
 public:
  RunScheduler(std::vector<Job>& jobs, ReevalReport& report, const env::EnvConfig& config, const ReevalOptions& options,
               const reward::RewardFunction& reward_fn, const std::function<void(size_t, size_t)>& progress)
      : jobs_(jobs),
        report_(report),
        reward_fn_(reward_fn),
        progress_(progress),
        total_(jobs.size() * static_cast<size_t>(std::max(1, options.repeats))),
        slots_(std::max(1, std::min<int>(options.parallel, static_cast<int>(total_)))),
        pool_(config, slots_) {
    for (int r = 0; r < std::max(1, options.repeats); ++r) {
      for (size_t j = 0; j < jobs.size(); ++j) queue_.push_back(j);
    }
    for (int s = slots_ - 1; s >= 0; --s) free_slots_.push_back(s);
  }

  void run_all() {
    while (!queue_.empty() || !running_.empty()) {
      start_runs();
      if (running_.empty()) continue;
      for (auto& step : pool_.recv(1)) finish_run(step);
    }
  }

 private:
  // Submits queued runs on the free slots.
  void start_runs() {
    while (!queue_.empty() && !free_slots_.empty()) {
      const size_t j = queue_.front();
      queue_.pop_front();
      Job& job = jobs_[j];
      ReevalRow& row = report_.rows[job.row];
      if (job.refused) {
        ++done_;
        continue;
      }
      const int slot = free_slots_.back();
      try {
        pool_.reset(slot, *job.task, row.seed);
      } catch (const InputError& e) {
        // The task itself is refused (it does not type-check here): every
        // run of it would be.
        append_note(&row, std::string("the environment refused the task: ") + e.what());
        job.refused = true;
        ++done_;
        continue;
      }
      free_slots_.pop_back();
      Action submit;
      submit.type = ActionType::kSubmit;
      submit.solution = job.solution;
      pool_.send({submit}, {slot});
      running_[slot] = j;
    }
  }

  void finish_run(const env::EnvStep& step) {
    const size_t j = running_.at(step.env_id);
    running_.erase(step.env_id);
    free_slots_.push_back(step.env_id);
    Job& job = jobs_[j];
    ++report_.runs;
    ++done_;
    const env::StepInfo& info = step.result.info;
    if (info.system_error()) {
      ++job.system_errors;
      job.last_system_error = info.error->message;
    } else {
      score_run(job, info.measurement, &report_.rows[job.row]);
    }
    if (progress_) progress_(done_, total_);
  }

  // Scores the run as the recorded turn was scored: its turn, its count of
  // compile errors and its exemplars.
  void score_run(const Job& job, Measurement m, ReevalRow* row) const {
    m.turn = job.env_turn;
    if (job.compile_errors_so_far >= 0) m.compile_errors_so_far = job.compile_errors_so_far;
    reward::RewardContext ctx;
    ctx.exemplar_speedups = job.exemplars;
    row->rewards.push_back(reward_fn_.compute(m, ctx).total);
    row->outcomes.push_back(outcome_name(m.outcome));
    row->speedups.push_back(m.speedup_eager);
  }

  std::vector<Job>& jobs_;
  ReevalReport& report_;
  const reward::RewardFunction& reward_fn_;
  const std::function<void(size_t, size_t)>& progress_;
  const size_t total_;
  const int slots_;
  env::EnvPool pool_;
  std::deque<size_t> queue_;  // job indices, one entry per run
  std::vector<int> free_slots_;
  std::map<int, size_t> running_;  // slot -> job
  size_t done_ = 0;
};

}  // namespace

ReevalReport reevaluate(const std::vector<RecordedEpisode>& episodes, const TaskLookup& tasks,
                        const env::EnvConfig& config, const ReevalOptions& options,
                        const std::function<void(size_t, size_t)>& progress) {
  ReevalReport report;
  report.backend = env::backend_name(config.backend);
  std::vector<Job> jobs = collect_jobs(episodes, tasks, options, backend_modes(config), &report);
  if (!jobs.empty()) {
    const reward::RewardFunction reward_fn = reward::RewardFunction::load(config.reward.function);
    note_recording_differences(jobs, reward_fn, &report);
    RunScheduler(jobs, report, config, options, reward_fn, progress).run_all();
    for (const Job& job : jobs) {
      if (job.refused) continue;
      decide(&report.rows[job.row], job, options);
    }
  }
  for (const auto& row : report.rows) ++report.verdicts[reeval_verdict_name(row.verdict)];
  return report;
}

json to_json(const ReevalRow& row) {
  json speedups = json::array();
  for (const auto& s : row.speedups) speedups.push_back(s ? json(*s) : json(nullptr));
  return {{"trajectory_id", row.trajectory_id},
          {"task_id", row.task_id},
          {"file", row.file},
          {"line", row.line},
          {"turn", row.turn},
          {"seed", row.seed},
          {"recorded_outcome", row.recorded_outcome},
          {"recorded_speedup", row.recorded_speedup ? json(*row.recorded_speedup) : json(nullptr)},
          {"recorded_reward", row.recorded_reward},
          {"outcomes", row.outcomes},
          {"speedups", speedups},
          {"rewards", row.rewards},
          {"spread", row.spread()},
          {"verdict", reeval_verdict_name(row.verdict)},
          {"note", row.note}};
}

json to_json(const ReevalReport& report) {
  json rows = json::array();
  for (const auto& r : report.rows) rows.push_back(to_json(r));
  return {{"backend", report.backend}, {"runs", report.runs}, {"verdicts", report.verdicts}, {"rows", rows}};
}

std::string format_reevaluation(const ReevalReport& report) {
  std::ostringstream out;
  size_t reproduced = 0, evaluated = 0;
  std::vector<double> spreads, ratios;
  for (const auto& r : report.rows) {
    if (r.verdict == ReevalVerdict::kNotReevaluated) continue;
    ++evaluated;
    if (r.verdict == ReevalVerdict::kExact || r.verdict == ReevalVerdict::kWithinSpread) ++reproduced;
    spreads.push_back(r.spread());
    for (const auto& s : r.speedups) {
      if (s && r.recorded_speedup && *r.recorded_speedup > 0) ratios.push_back(*s / *r.recorded_speedup);
    }
  }
  const Distribution spread = distribution(spreads);
  const Distribution ratio = distribution(ratios);
  out << "Re-evaluation on this machine (" << report.backend << " backend): " << report.rows.size()
      << " recorded submits, " << evaluated << " re-run (" << report.runs << " runs); " << reproduced << " of "
      << evaluated << " reproduce the recorded reward";
  if (spread.n > 0)
    out << "; reward spread across runs p50 " << format_number(spread.median) << ", max " << format_number(spread.max);
  out << "\n";
  if (ratio.n > 0) {
    out << "Speedup re-run / recorded: p50 " << format_number(ratio.median) << " [min " << format_number(ratio.min)
        << ", max " << format_number(ratio.max) << "] over " << ratio.n << " timed runs\n";
  }
  std::string verdicts;
  for (const auto& [v, n] : report.verdicts) verdicts += (verdicts.empty() ? "" : ", ") + v + " " + std::to_string(n);
  out << "Verdicts: " << verdicts << "\n";
  TextTable table(
      {"task", "trajectory", "turn", "recorded", "runs (reward)", "runs (outcome, speedup)", "verdict", "note"}, 60);
  constexpr size_t kShown = 200;  // the rest are in --json and the report's data.json
  for (size_t row = 0; row < report.rows.size() && row < kShown; ++row) {
    const ReevalRow& r = report.rows[row];
    std::string rewards, outcomes;
    for (size_t i = 0; i < r.rewards.size(); ++i) rewards += (i ? " " : "") + format_number(r.rewards[i]);
    for (size_t i = 0; i < r.outcomes.size(); ++i) {
      outcomes += (i ? " " : "") + r.outcomes[i] + (r.speedups[i] ? " " + format_number(*r.speedups[i]) + "x" : "");
    }
    table.add({r.task_id, r.trajectory_id, std::to_string(r.turn),
               format_number(r.recorded_reward) + " " + outcome_or_none(r.recorded_outcome) +
                   (r.recorded_speedup ? " " + format_number(*r.recorded_speedup) + "x" : ""),
               rewards.empty() ? "-" : rewards, outcomes.empty() ? "-" : outcomes, reeval_verdict_name(r.verdict),
               r.note});
  }
  out << table.render();
  if (report.rows.size() > kShown) out << "... and " << report.rows.size() - kShown << " more submits\n";
  return out.str();
}

}  // namespace kforge::rollout::replay
