// kforge eval --solutions: the display of a resumable batch (progress on
// stderr, the summary table or JSON on stdout); the batch itself is
// env::run_eval_batch (kforge/env/eval_batch.h).
#include "eval_solutions.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include "commands.h"
#include "kforge/env/eval_batch.h"

namespace kforge::cli {
namespace {

using Clock = std::chrono::steady_clock;

// One line redrawn on a terminal, one line per pair otherwise (logs, CI).
class Progress {
 public:
  Progress(size_t total, bool tty) : total_(total), tty_(tty), start_(Clock::now()) {}

  void add(const json& row) {
    ++done_;
    const std::string verdict = row.value("verdict", std::string("?"));
    ++counts_[verdict];
    const double s = std::chrono::duration<double>(Clock::now() - start_).count();
    if (tty_) {
      constexpr int kWidth = 28;
      const int filled = total_ ? static_cast<int>(kWidth * done_ / total_) : kWidth;
      std::string bar(static_cast<size_t>(filled), '#');
      bar.resize(kWidth, '.');
      const double rate = s > 0 ? done_ / s : 0;
      const double eta = rate > 0 ? (total_ - done_) / rate : 0;
      std::fprintf(stderr, "\r[%s] %zu/%zu  %.2f/s  eta %.0fs  correct %zu  other %zu\x1b[K", bar.c_str(), done_,
                   total_, rate, eta, counts_["correct"], done_ - counts_["correct"]);
    } else {
      const json& sp = row.contains("speedup") ? row["speedup"] : json(nullptr);
      char speed[32] = "";
      if (sp.is_number()) std::snprintf(speed, sizeof(speed), " %.2fx", sp.get<double>());
      std::fprintf(stderr, "[%zu/%zu] %s: %s%s\n", done_, total_, row.value("label", std::string()).c_str(),
                   verdict.c_str(), speed);
    }
    std::fflush(stderr);
  }

  void finish() {
    if (tty_ && done_ > 0) std::fprintf(stderr, "\n");
  }

 private:
  size_t total_, done_ = 0;
  bool tty_;
  Clock::time_point start_;
  std::map<std::string, size_t> counts_;
};

void print_summary(const json& s) {
  std::printf("%-24s %8s\n", "verdict", "pairs");
  for (const auto& [verdict, n] : s["verdicts"].items()) std::printf("%-24s %8d\n", verdict.c_str(), n.get<int>());
  std::printf("%-24s %8zu\n", "total", s["pairs"].get<size_t>());
  if (s.contains("speedup")) {
    const json& sp = s["speedup"];
    std::printf(
        "\nspeedup over eager of %zu correct, timed solutions: median %.2fx, geomean %.2fx, best %.2fx (%s); "
        "%d faster than eager\n",
        sp["correct_timed"].get<size_t>(), sp["median"].get<double>(), sp["geomean"].get<double>(),
        sp["best"]["speedup"].get<double>(), sp["best"]["label"].get<std::string>().c_str(),
        sp["faster_than_eager"].get<int>());
  }
  std::printf(
      "\n%zu evaluated now, %zu from earlier results, %d not evaluated, %zu not started; %.1f s; results in %s\n",
      s["evaluated_now"].get<size_t>(), s["from_earlier_results"].get<size_t>(), s["not_evaluated"].get<int>(),
      s["not_started"].get<size_t>(), s["seconds"].get<double>(), s["results"].get<std::string>().c_str());
}

}  // namespace

int run_batch(const BatchArgs& a, const env::EnvConfig& config) {
  std::unique_ptr<Progress> progress;
  env::EvalBatchObserver observer;
  observer.on_start = [&](size_t to_evaluate) {
    progress = std::make_unique<Progress>(to_evaluate, !a.progress_lines && ::isatty(STDERR_FILENO));
  };
  observer.on_row = [&](const json& row) { progress->add(row); };
  const env::EvalBatchResult result = env::run_eval_batch(a, config, observer);
  if (progress) progress->finish();
  if (a.json_output) {
    std::cout << result.summary.dump(2) << "\n";
  } else {
    print_summary(result.summary);
  }
  const bool incomplete =
      result.summary["not_evaluated"].get<int>() > 0 || result.summary["not_started"].get<size_t>() > 0;
  return incomplete ? kExitIncomplete : kExitOk;
}

}  // namespace kforge::cli
