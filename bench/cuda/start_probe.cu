// start_probe: what a CUDA runner's start-up costs and which part of it
// disturbs a kernel timed at the same moment in another process. Standalone
// (no kforge libraries), so it runs on a bare GPU machine:
//
//   start_probe start LEVEL          one start-up to LEVEL, printing each phase's ms
//   start_probe parallel LEVEL N     N start-ups at once; wall ms until all are done
//   start_probe disturb LEVEL S      victim: time a ~50 us kernel with events for S s
//                                    while start-ups to LEVEL run back to back beside it
//   start_probe traced S R           R rounds of two processes one after the other, each
//                                    started to level 4 and timing that kernel for S s:
//                                    a plain one, and one with CUPTI activity tracing
//                                    initialized in it (enabled and disabled once, as a
//                                    profiler runner's start-up leaves it); each also
//                                    times a tiny kernel's launch on the host, and the
//                                    traced one then traces one call in-process. Whether
//                                    a timing runner could carry the tracer and profile
//                                    its own candidate after the timing, instead of a
//                                    second runner and context (docs/rollout.md)
//
// LEVEL: 0 process only (exec, dynamic linking), 1 + cuInit, 2 + context
// (cudaSetDevice + cudaFree(0)), 3 + stream, events, a kernel and a graph,
// 4 + cuBLAS handle and one small GEMM (what kforge-runner's warm-up does),
// 5 + what a profiler runner adds (its initialize_profiler): the L2 flush
// buffer (twice the L2, zeroed and read once), CUPTI activity tracing
// registered, enabled and disabled, and the range profiler set up and enabled
// on the context, through the runner's own code (env/src/cupti), its steps
// printed as phases of their own (initialize, host, metrics, config_image,
// enable: cupti::RangeMetrics::setup_phases_ms).
// Results say which phases need the GPU gate (docs/execution.md, "The GPU gate").
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cupti/activity_trace.h"
#include "cupti/range_metrics.h"
#include "probe_support.cuh"

namespace {

using probe::now_ms;
using probe::pct;
using probe::touch;

// One start-up to `level`; returns the phases' ms.
std::vector<std::pair<const char*, double>> start_up(int level) {
  std::vector<std::pair<const char*, double>> phases;
  double t = now_ms();
  auto mark = [&](const char* name) {
    double n = now_ms();
    phases.push_back({name, n - t});
    t = n;
  };
  if (level >= 1) {
    if (cuInit(0) != CUDA_SUCCESS) std::exit(3);
    mark("cuInit");
  }
  if (level >= 2) {
    PROBE_CHECK(cudaSetDeviceFlags(cudaDeviceScheduleSpin));
    PROBE_CHECK(cudaSetDevice(0));
    PROBE_CHECK(cudaFree(nullptr));
    mark("context");
  }
  if (level >= 3) {
    cudaStream_t s;
    cudaEvent_t a, b;
    PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    PROBE_CHECK(cudaEventCreate(&a));
    PROBE_CHECK(cudaEventCreate(&b));
    float* x;
    PROBE_CHECK(cudaMalloc(&x, 1 << 20));
    PROBE_CHECK(cudaMemsetAsync(x, 0, 1 << 20, s));
    PROBE_CHECK(cudaEventRecord(a, s));
    touch<<<64, 256, 0, s>>>(x, (1 << 20) / 4);
    PROBE_CHECK(cudaEventRecord(b, s));
    PROBE_CHECK(cudaStreamSynchronize(s));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    PROBE_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    touch<<<64, 256, 0, s>>>(x, (1 << 20) / 4);
    PROBE_CHECK(cudaStreamEndCapture(s, &g));
    PROBE_CHECK(cudaGraphInstantiate(&ge, g, 0));
    PROBE_CHECK(cudaGraphLaunch(ge, s));
    PROBE_CHECK(cudaDeviceSynchronize());
    mark("warmups");
    if (level >= 4) {
      cublasHandle_t h;
      if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) std::exit(4);
      cublasSetStream(h, s);
      float one = 1, zero = 0;
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 64, 64, 64, &one, x, 64, x, 64, &zero, x + 8192, 64);
      PROBE_CHECK(cudaDeviceSynchronize());
      mark("cublas");
    }
    if (level >= 5) {
      int l2 = 0;
      PROBE_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
      const long flush = 2l * l2 / 4;
      float* buffer;
      PROBE_CHECK(cudaMalloc(&buffer, flush * 4));
      PROBE_CHECK(cudaMemsetAsync(buffer, 0, flush * 4, s));
      touch<<<1056, 256, 0, s>>>(buffer, flush);
      PROBE_CHECK(cudaStreamSynchronize(s));
      mark("flush_buffer");
      if (std::string e = kforge::cupti::ActivityTrace::initialize(); !e.empty()) {
        std::fprintf(stderr, "start_probe: %s\n", e.c_str());
        std::exit(5);
      }
      mark("activity_trace");
      // Kept alive until the process exits, as a profiler runner keeps it.
      static kforge::cupti::RangeMetrics* metrics =
          new kforge::cupti::RangeMetrics(0, kforge::cupti::default_metric_names());
      if (!metrics->available()) std::fprintf(stderr, "start_probe: %s\n", metrics->why_unavailable().c_str());
      // Its steps instead of one range_profiler phase: which of them a
      // judge could do once for all its profiler runners.
      for (const auto& [step, ms] : metrics->setup_phases_ms()) phases.push_back({step, ms});
      t = now_ms();
    }
  }
  return phases;
}

// Spawns this binary as `child LEVEL`; returns its pid. The child exits after
// its start-up, so back-to-back children are back-to-back start-ups.
pid_t spawn_self(const char* self, const char* mode, const std::string& a, const std::string& b = "") {
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl(self, self, mode, a.c_str(), b.empty() ? nullptr : b.c_str(), (char*)nullptr);
    _exit(127);
  }
  return pid;
}

pid_t spawn_child(const char* self, int level) { return spawn_self(self, "child", std::to_string(level)); }

double median(std::vector<double> v) { return pct(std::move(v), 0.5); }

// The kernel the probes time: 64 MiB read and written (~40-60 us on an
// H100) on a stream of its own, warmed up by 50 launches.
struct Victim {
  static constexpr long n = 16l << 20;
  float* x = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  Victim() {
    PROBE_CHECK(cudaMalloc(&x, n * 4));
    PROBE_CHECK(cudaMemset(x, 0, n * 4));
    PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    PROBE_CHECK(cudaEventCreate(&a));
    PROBE_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 50; ++i) touch<<<1056, 256, 0, s>>>(x, n);
    PROBE_CHECK(cudaStreamSynchronize(s));
  }
  double time_once() const { return probe::time_touch(x, n, s, a, b); }
};

int disturb(const char* self, int level, double seconds) {
  PROBE_CHECK(cudaSetDeviceFlags(cudaDeviceScheduleSpin));
  PROBE_CHECK(cudaSetDevice(0));
  const Victim v;
  std::vector<double> ms;
  int starts = 0;
  pid_t child = level >= 0 ? spawn_child(self, level) : -1;
  const double end = now_ms() + seconds * 1000;
  while (now_ms() < end) {
    ms.push_back(v.time_once());
    if (child > 0) {
      int st;
      if (waitpid(child, &st, WNOHANG) == child) {
        ++starts;
        child = spawn_child(self, level);
      }
    }
  }
  if (child > 0) waitpid(child, nullptr, 0);
  const double m = median(ms);
  int slow = 0;
  for (double v : ms) slow += v > 1.2 * m;
  std::printf("disturb level=%d samples=%zu starts=%d median_ms=%.5f p90=%.5f p99=%.5f max=%.5f over_1.2x=%.3f%%\n",
              level, ms.size(), starts, m, pct(ms, 0.9), pct(ms, 0.99), pct(ms, 1.0), 100.0 * slow / ms.size());
  return 0;
}

// One process of `traced`: a runner's start-up (level 4), with CUPTI
// activity tracing initialized when `with_tracer`, then the 64 MiB kernel
// timed with events for `seconds`, a tiny kernel's host launch cost, and
// (with the tracer) one traced call: enable, launch, synchronize, flush.
int victim(bool with_tracer, double seconds) {
  start_up(4);
  double init_ms = 0;
  if (with_tracer) {
    const double t0 = now_ms();
    if (std::string e = kforge::cupti::ActivityTrace::initialize(); !e.empty()) {
      std::fprintf(stderr, "start_probe: %s\n", e.c_str());
      return 5;
    }
    init_ms = now_ms() - t0;
  }
  const Victim v;
  std::vector<double> ms;
  const double end = now_ms() + seconds * 1000;
  while (now_ms() < end) ms.push_back(v.time_once());
  // The host's side of a launch, where driver callbacks would show: blocks of
  // 500 launches of a one-warp kernel (fewer than the launch queue holds, so
  // none waits for the GPU), the median block's microseconds a launch.
  std::vector<double> launch_us;
  for (int block = 0; block < 7; ++block) {
    const double t0 = now_ms();
    for (int i = 0; i < 500; ++i) touch<<<1, 32, 0, v.s>>>(v.x, 32);
    launch_us.push_back((now_ms() - t0) * 2);  // ms for 500 launches x 2 = us a launch
    PROBE_CHECK(cudaStreamSynchronize(v.s));
  }
  double trace_ms = 0;
  size_t records = 0, dropped = 0;
  if (with_tracer) {
    const double t0 = now_ms();
    if (std::string e = kforge::cupti::ActivityTrace::start(); !e.empty()) {
      std::fprintf(stderr, "start_probe: trace did not start: %s\n", e.c_str());
      return 6;
    }
    touch<<<1056, 256, 0, v.s>>>(v.x, v.n);
    PROBE_CHECK(cudaStreamSynchronize(v.s));
    records = kforge::cupti::ActivityTrace::stop(4096, &dropped).size();
    trace_ms = now_ms() - t0;
  }
  const double m = median(ms);
  std::printf(
      "traced tracer=%d samples=%zu median_ms=%.5f p10=%.5f p90=%.5f iqr_pct=%.3f launch_us=%.3f init_ms=%.1f "
      "trace_ms=%.2f records=%zu dropped=%zu\n",
      with_tracer ? 1 : 0, ms.size(), m, pct(ms, 0.1), pct(ms, 0.9), 100 * (pct(ms, 0.75) - pct(ms, 0.25)) / m,
      median(launch_us), init_ms, trace_ms, records, dropped);
  return 0;
}

// Rounds of a plain and a traced process one after the other, so that a
// drift of the GPU's clocks falls on both alike.
int traced(const char* self, double seconds, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    for (int with_tracer = 0; with_tracer < 2; ++with_tracer) {
      const pid_t pid = spawn_self(self, "victim", with_tracer ? "1" : "0", std::to_string(seconds));
      int st = 0;
      waitpid(pid, &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        std::printf("traced tracer=%d failed: status %d\n", with_tracer, st);
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: start_probe start|parallel|disturb|child LEVEL [N|S] | traced S [ROUNDS]\n");
    return 1;
  }
  const std::string mode = argv[1];
  const int level = std::atoi(argv[2]);
  if (mode == "child") {
    start_up(level);
    return 0;
  }
  if (mode == "start") {
    const double t0 = now_ms();
    auto phases = start_up(level);
    std::printf("start level=%d total_ms=%.1f", level, now_ms() - t0);
    for (auto& [n, v] : phases) std::printf(" %s=%.1f", n, v);
    std::printf("\n");
    return 0;
  }
  if (mode == "parallel") {
    const int n = argc > 3 ? std::atoi(argv[3]) : 4;
    const double t0 = now_ms();
    std::vector<pid_t> pids;
    for (int i = 0; i < n; ++i) pids.push_back(spawn_child(argv[0], level));
    for (pid_t p : pids) waitpid(p, nullptr, 0);
    std::printf("parallel level=%d n=%d wall_ms=%.1f\n", level, n, now_ms() - t0);
    return 0;
  }
  if (mode == "disturb") return disturb(argv[0], level, argc > 3 ? std::atof(argv[3]) : 3.0);
  if (mode == "victim") return victim(level != 0, argc > 3 ? std::atof(argv[3]) : 2.0);
  if (mode == "traced") return traced(argv[0], std::atof(argv[2]), argc > 3 ? std::atoi(argv[3]) : 3);
  return 1;
}
