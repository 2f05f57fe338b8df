// Fresh runners for every candidate, with spares started in advance so that
// process start-up (exec, dynamic linking, network namespace, and on GPUs
// cuInit, the CUDA context, warm-ups and cuBLAS) is off the critical path of
// the next request.
//
// Two kinds of start-up (StartUp):
//   * kBesideTiming: a timing runner. Its start-up may run while another
//     process times a kernel: measured on an H100 with bench/cuda/start_probe
//     (a 63 us kernel timed with events in one process while start-ups ran back
//     to back in another), the kernel's median moved by at most 0.5 % at every
//     start-up level (process only, + cuInit, + context, + warm-up kernels and
//     a graph, + cuBLAS; two runs alone differed by 0.25 %); only the share
//     of samples above 1.2x the median rose (0.18-0.26 % alone, 0.40-0.53 %
//     beside start-ups), which the median ignores. So a replacement starts as
//     soon as a spare is taken, during that candidate's load, verification and
//     timing, several lanes' at once, and no timing ever waits for one.
//   * kOutsideTiming: a profiler runner (CUPTI set-up), not covered by that
//     measurement, and a CPU runner, whose start-up would share the pinned
//     core of the candidate being timed (judge_loop.cpp). Started only where nothing is timed (the caller says when,
//     with refill()); settle() waits for every such spare to finish starting
//     before a measurement, and between requests the judge holds a share of
//     the GPU gate while one is still starting (judge_loop.cpp), so that other
//     judges on the same GPU time nothing beside it.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "ipc/deadline.h"
#include "judge/runner_process.h"

namespace kforge::judge {

class RunnerPool {
 public:
  enum class StartUp { kBesideTiming, kOutsideTiming };
  // `spares`: how many runners wait ready. One suffices on the CPU, where a
  // runner starts in milliseconds; a CUDA runner takes 0.4-0.6 s alone and
  // up to 1.9 s for 8 at once (H100), longer than several evaluations, so
  // the CUDA judge keeps more (judge_loop.cpp, kDefaultCudaSpares).
  explicit RunnerPool(RunnerProcess::Config config, int spares = 1, StartUp start_up = StartUp::kBesideTiming)
      : config_(std::move(config)), target_(spares), start_up_(start_up) {}

  // A waiting spare if one is still alive, else a new runner, given until
  // kStartLimitMs after its spawn (and at most until `deadline`) to say
  // `started`. Start-up is the harness's time, not the candidate's, so it is
  // waited for here and never out of the candidate's load limit: on a busy
  // GPU host a spare's context can take longer than a call's timeout. A
  // spare that does not start is replaced once by a new runner; `started`
  // is the last runner's start reply (not ok: it says why, and the runner is
  // gone). A kBesideTiming pool starts the replacement spares at once; a
  // kOutsideTiming pool starts none (see refill()). Throws SystemError if no
  // runner can be spawned.
  struct Taken {
    std::unique_ptr<RunnerProcess> runner;
    RunnerReply started;
  };
  Taken take(ipc::Deadline deadline);
  // Starts spares up to the target; failures are left for take() to report.
  // For a kOutsideTiming pool, call it where a starting runner disturbs no
  // measurement.
  void refill();
  // kOutsideTiming: waits until every spare has finished starting (or kills
  // one that takes longer than kStartLimitMs or the deadline) and returns the
  // milliseconds waited. kBesideTiming: returns 0 at once.
  double settle(ipc::Deadline deadline);
  static constexpr double kStartLimitMs = 30000;
  int spares() const { return static_cast<int>(spares_.size()); }

  // Spares whose `started` has not been read yet.
  int starting() const;
  // Reads `started` from every spare that has sent it, without waiting for
  // the others (a spare starting for longer than kStartLimitMs is killed),
  // and returns the control fds of those still starting whose start-up must
  // not overlap a timing (kOutsideTiming), for poll(2) under the GPU gate.
  std::vector<int> collect_started();
  StartUp start_up() const { return start_up_; }

 private:
  struct Spare {
    std::unique_ptr<RunnerProcess> runner;
    std::chrono::steady_clock::time_point spawned;
  };
  RunnerProcess::Config config_;
  int target_;
  StartUp start_up_;
  std::deque<Spare> spares_;
};

}  // namespace kforge::judge
