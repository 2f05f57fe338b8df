// teardown_probe: which CUDA calls of one process wait while another
// process's context is torn down, and for how long. Standalone (no kforge
// libraries), so it runs on a bare GPU machine:
//
//   teardown_probe SECONDS [RESERVE_MIB]
//   teardown_probe parts PARTS N      N runners of PARTS, each killed when ready,
//                                     alone: teardown ms (median, p90)
//   teardown_probe batch PARTS K N    N rounds of K runners of PARTS started
//                                     together and killed together: how long
//                                     until the last is gone (does the driver
//                                     tear contexts down in parallel?)
//
// A "runner" child starts as kforge-runner does (context, warm-up kernel,
// cuBLAS, the judge's arena mapped by IPC, a stream-ordered pool reserve of
// RESERVE_MIB, default 1024), says ready, and is SIGKILLed; its teardown
// lasts until waitpid returns. Children follow one another for SECONDS, with
// a random pause between them. Meanwhile this process (the "judge") runs
// the calls below round robin, each sample stamped with when it ran, and
// sorts the samples by what the child was doing: starting, being torn down,
// or nothing (between children). A call whose "teardown" median is far
// above its "idle" one is serialized with the teardown; the judge must not
// put it between a used runner's kill and the next timing.
//
// PARTS says which of a runner's start-up a "parts" runner does, beyond its
// context: k a kernel and a CUDA graph, b cuBLAS, i the arena by IPC, p the
// stream-ordered pool reserve, g the graph-memory reserve (a captured
// allocation), as kforge-runner does them; "-" the context alone. What a
// teardown costs by part says what a runner should not keep.
//
// Calls: malloc (cudaMalloc + cudaFree, 64 MiB), ipc_open (open and close a
// third process's IPC handle, as a runner maps its arena), memcpy (16 MiB
// host to device and back, pinned), launch (a 16 MiB kernel, wall time with
// its synchronize), event (the same kernel's time by events: what timing
// reads), pool (a new stream-ordered pool, a 64 MiB allocation from it, and
// its destruction: a runner's pool reserve).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "probe_support.cuh"

namespace {

using probe::now_ms;
using probe::pct;
using probe::touch;

std::string to_hex(const void* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const unsigned b = static_cast<const unsigned char*>(p)[i];
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

cudaIpcMemHandle_t from_hex(const std::string& s) {
  cudaIpcMemHandle_t h{};
  auto* out = reinterpret_cast<unsigned char*>(&h);
  for (size_t i = 0; i < sizeof(h) && 2 * i + 1 < s.size(); ++i) out[i] = std::stoi(s.substr(2 * i, 2), nullptr, 16);
  return h;
}

// Holds 64 MiB whose IPC handle it prints, until its stdin closes.
int holder() {
  PROBE_CHECK(cudaSetDevice(0));
  void* p = nullptr;
  PROBE_CHECK(cudaMalloc(&p, 64 << 20));
  cudaIpcMemHandle_t h;
  PROBE_CHECK(cudaIpcGetMemHandle(&h, p));
  std::printf("%s\n", to_hex(&h, sizeof(h)).c_str());
  std::fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}

// A runner's start-up (the PARTS above; "kbipg" is all), then a byte on
// stdout, then waiting to be killed.
int runner(const std::string& arena_handle, size_t reserve_mib, const std::string& parts) {
  auto has = [&parts](char c) { return parts.find(c) != std::string::npos; };
  PROBE_CHECK(cudaSetDeviceFlags(cudaDeviceScheduleSpin));
  PROBE_CHECK(cudaSetDevice(0));
  PROBE_CHECK(cudaFree(nullptr));
  cudaStream_t s;
  PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* x;
  PROBE_CHECK(cudaMalloc(&x, 1 << 20));
  if (has('k')) {
    touch<<<64, 256, 0, s>>>(x, (1 << 20) / 4);
    cudaGraph_t g;
    cudaGraphExec_t ge;
    PROBE_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    touch<<<64, 256, 0, s>>>(x, (1 << 20) / 4);
    PROBE_CHECK(cudaStreamEndCapture(s, &g));
    PROBE_CHECK(cudaGraphInstantiate(&ge, g, 0));
    PROBE_CHECK(cudaGraphLaunch(ge, s));
  }
  if (has('b')) {
    cublasHandle_t blas;
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) return 4;
    cublasSetStream(blas, s);
    float one = 1, zero = 0;
    cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 64, 64, 64, &one, x, 64, x, 64, &zero, x + 8192, 64);
  }
  if (has('i')) {
    void* arena = nullptr;
    PROBE_CHECK(cudaIpcOpenMemHandle(&arena, from_hex(arena_handle), cudaIpcMemLazyEnablePeerAccess));
  }
  const size_t reserve = reserve_mib << 20;
  if (has('p')) {
    cudaMemPool_t pool;
    PROBE_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t keep = UINT64_MAX;
    PROBE_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    void* p = nullptr;
    PROBE_CHECK(cudaMallocAsync(&p, reserve, s));
    PROBE_CHECK(cudaMemsetAsync(p, 0, reserve, s));
    PROBE_CHECK(cudaFreeAsync(p, s));
  }
  if (has('g')) {
    void* p = nullptr;
    cudaGraph_t g;
    PROBE_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    PROBE_CHECK(cudaMallocAsync(&p, reserve, s));
    PROBE_CHECK(cudaFreeAsync(p, s));
    PROBE_CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    PROBE_CHECK(cudaGraphInstantiate(&ge, g, 0));
    PROBE_CHECK(cudaGraphLaunch(ge, s));
  }
  PROBE_CHECK(cudaStreamSynchronize(s));
  if (write(1, "r", 1) != 1) return 5;
  pause();
  return 0;
}

struct Interval {
  double begin, end;
};

struct ChildLog {
  std::mutex mu;
  std::vector<Interval> starting, teardown;
};

pid_t spawn(const char* self, const std::vector<std::string>& args, int* out_fd, int* in_fd) {
  int out[2], in[2];
  if (pipe(out) != 0 || pipe(in) != 0) std::exit(6);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(in[0], 0);
    close(out[0]);
    close(in[1]);
    std::vector<char*> argv{const_cast<char*>(self)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(self, argv.data());
    _exit(127);
  }
  close(out[1]);
  close(in[0]);
  *out_fd = out[0];
  *in_fd = in[1];
  return pid;
}

// The holder process of the IPC-shared buffer: its stdin (closing it ends
// the holder) and the buffer's handle, as hex.
struct Holder {
  int stdin_fd = -1;
  std::string handle;
};

Holder start_holder(const char* self) {
  Holder h;
  int out = -1;
  spawn(self, {"holder"}, &out, &h.stdin_fd);
  char c;
  while (read(out, &c, 1) == 1 && c != '\n') h.handle += c;
  close(out);
  return h;
}

std::vector<double> durations(const std::vector<Interval>& spans) {
  std::vector<double> ms;
  for (const auto& i : spans) ms.push_back(i.end - i.begin);
  return ms;
}

// Runners one after another until `stop`: start, ready, SIGKILL, reaped.
void cycle_runners(const char* self, const std::string& handle, size_t reserve_mib, std::atomic<bool>* stop,
                   ChildLog* log, const std::string& parts = "kbipg", int count = 0) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> pause_ms(5, 60);
  while (!*stop) {
    int out = -1, in = -1;
    const double spawned = now_ms();
    pid_t pid = spawn(self, {"runner", handle, std::to_string(reserve_mib), parts}, &out, &in);
    char c;
    const bool ready = read(out, &c, 1) == 1;
    const double up = now_ms();
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    const double gone = now_ms();
    close(out);
    close(in);
    if (!ready) {
      std::fprintf(stderr, "a runner failed to start\n");
      std::exit(7);
    }
    {
      std::lock_guard<std::mutex> lock(log->mu);
      log->starting.push_back({spawned, up});
      log->teardown.push_back({up, gone});
    }
    if (count > 0 && static_cast<int>(log->teardown.size()) >= count) return;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(pause_ms(rng)));
  }
}

// Runners of `parts` killed one after another with nothing beside them.
int teardown_by_parts(const char* self, const std::string& parts, int count, size_t reserve_mib) {
  const Holder holder = start_holder(self);
  const std::string& handle = holder.handle;
  ChildLog log;
  std::atomic<bool> stop{false};
  cycle_runners(self, handle, reserve_mib, &stop, &log, parts, count);
  close(holder.stdin_fd);
  const std::vector<double> teardown_ms = durations(log.teardown), start_ms = durations(log.starting);
  std::printf("parts=%-6s runners=%zu start_ms median=%.1f teardown_ms median=%.1f p90=%.1f min=%.1f\n", parts.c_str(),
              teardown_ms.size(), pct(start_ms, 0.5), pct(teardown_ms, 0.5), pct(teardown_ms, 0.9),
              pct(teardown_ms, 0.0));
  return 0;
}

// Rounds of `batch` runners killed at once; a round lasts from the first
// SIGKILL to the last runner reaped.
int teardown_in_batches(const char* self, const std::string& parts, int batch, int rounds, size_t reserve_mib) {
  const Holder holder = start_holder(self);
  std::vector<double> round_ms;
  for (int r = 0; r < rounds; ++r) {
    std::vector<pid_t> pids;
    std::vector<int> fds;
    for (int i = 0; i < batch; ++i) {
      int out = -1, in = -1;
      pids.push_back(spawn(self, {"runner", holder.handle, std::to_string(reserve_mib), parts}, &out, &in));
      fds.push_back(out);
      fds.push_back(in);
    }
    for (size_t i = 0; i < fds.size(); i += 2) {
      char c;
      if (read(fds[i], &c, 1) != 1) {
        std::fprintf(stderr, "a runner failed to start\n");
        std::exit(7);
      }
    }
    const double killed = now_ms();
    for (pid_t pid : pids) kill(pid, SIGKILL);
    for (pid_t pid : pids) waitpid(pid, nullptr, 0);
    round_ms.push_back(now_ms() - killed);
    for (int fd : fds) close(fd);
  }
  close(holder.stdin_fd);
  std::printf("parts=%-6s batch=%d rounds=%d teardown_ms median=%.1f min=%.1f max=%.1f per_runner=%.1f\n",
              parts.c_str(), batch, rounds, pct(round_ms, 0.5), pct(round_ms, 0.0), pct(round_ms, 1.0),
              pct(round_ms, 0.5) / batch);
  return 0;
}

struct Sample {
  int op;
  double begin, end, value;
};

bool overlaps(const Sample& s, const std::vector<Interval>& spans) {
  for (const auto& i : spans) {
    if (s.begin < i.end && i.begin < s.end) return true;
  }
  return false;
}

int judge(const char* self, double seconds, size_t reserve_mib) {
  const Holder holder = start_holder(self);
  const std::string& handle = holder.handle;

  PROBE_CHECK(cudaSetDeviceFlags(cudaDeviceScheduleSpin));
  PROBE_CHECK(cudaSetDevice(0));
  cudaStream_t s;
  PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const long n = 4l << 20;  // 16 MiB of floats
  float* x;
  PROBE_CHECK(cudaMalloc(&x, n * 4));
  PROBE_CHECK(cudaMemset(x, 0, n * 4));
  float* host;
  PROBE_CHECK(cudaMallocHost(&host, n * 4));
  cudaEvent_t a, b;
  PROBE_CHECK(cudaEventCreate(&a));
  PROBE_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 50; ++i) touch<<<1056, 256, 0, s>>>(x, n);
  PROBE_CHECK(cudaStreamSynchronize(s));

  const char* names[] = {"malloc", "ipc_open", "memcpy", "launch", "event", "pool"};
  const int ops = 6;
  auto run = [&](int op) -> double {  // the call's ms (event: the kernel's)
    const double t = now_ms();
    switch (op) {
      case 0: {
        void* p;
        PROBE_CHECK(cudaMalloc(&p, 64 << 20));
        PROBE_CHECK(cudaFree(p));
        break;
      }
      case 1: {
        void* p;
        PROBE_CHECK(cudaIpcOpenMemHandle(&p, from_hex(handle), cudaIpcMemLazyEnablePeerAccess));
        PROBE_CHECK(cudaIpcCloseMemHandle(p));
        break;
      }
      case 2:
        PROBE_CHECK(cudaMemcpyAsync(x, host, n * 4, cudaMemcpyHostToDevice, s));
        PROBE_CHECK(cudaMemcpyAsync(host, x, n * 4, cudaMemcpyDeviceToHost, s));
        PROBE_CHECK(cudaStreamSynchronize(s));
        break;
      case 3:
        touch<<<1056, 256, 0, s>>>(x, n);
        PROBE_CHECK(cudaStreamSynchronize(s));
        break;
      case 4:
        return probe::time_touch(x, n, s, a, b);
      case 5: {
        cudaMemPoolProps props{};
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = 0;
        cudaMemPool_t pool;
        PROBE_CHECK(cudaMemPoolCreate(&pool, &props));
        void* p;
        PROBE_CHECK(cudaMallocFromPoolAsync(&p, 64 << 20, pool, s));
        PROBE_CHECK(cudaFreeAsync(p, s));
        PROBE_CHECK(cudaStreamSynchronize(s));
        PROBE_CHECK(cudaMemPoolDestroy(pool));
        break;
      }
    }
    return now_ms() - t;
  };
  for (int op = 0; op < ops; ++op) run(op);

  ChildLog log;
  std::atomic<bool> stop{false};
  std::thread children([&] { cycle_runners(self, handle, reserve_mib, &stop, &log); });
  std::vector<Sample> samples;
  const double end = now_ms() + seconds * 1000;
  for (int i = 0; now_ms() < end; ++i) {
    const int op = i % ops;
    const double begin = now_ms();
    const double value = run(op);
    samples.push_back({op, begin, now_ms(), value});
  }
  stop = true;
  children.join();
  close(holder.stdin_fd);

  const std::vector<double> teardown_ms = durations(log.teardown), start_ms = durations(log.starting);
  std::printf("runners=%zu start_ms median=%.1f teardown_ms median=%.1f p90=%.1f (reserve %zu MiB)\n",
              teardown_ms.size(), pct(start_ms, 0.5), pct(teardown_ms, 0.5), pct(teardown_ms, 0.9), reserve_mib);
  std::printf("%-9s %-9s %7s %10s %10s %10s\n", "call", "beside", "samples", "median_ms", "p90_ms", "max_ms");
  for (int op = 0; op < ops; ++op) {
    std::vector<double> by[3];  // idle, starting, teardown
    for (const auto& smp : samples) {
      if (smp.op != op) continue;
      const int k = overlaps(smp, log.teardown) ? 2 : overlaps(smp, log.starting) ? 1 : 0;
      by[k].push_back(smp.value);
    }
    const char* kinds[] = {"idle", "starting", "teardown"};
    for (int k = 0; k < 3; ++k) {
      std::printf("%-9s %-9s %7zu %10.4f %10.4f %10.4f\n", names[op], kinds[k], by[k].size(), pct(by[k], 0.5),
                  pct(by[k], 0.9), pct(by[k], 1.0));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: teardown_probe SECONDS [RESERVE_MIB] | parts PARTS N | batch PARTS K N\n");
    return 1;
  }
  const std::string mode = argv[1];
  if (mode == "holder") return holder();
  if (mode == "runner" && argc > 4) return runner(argv[2], std::strtoull(argv[3], nullptr, 10), argv[4]);
  if (mode == "parts" && argc > 3) return teardown_by_parts(argv[0], argv[2], std::atoi(argv[3]), 256);
  if (mode == "batch" && argc > 4 && std::atoi(argv[3]) > 0 && std::atoi(argv[4]) > 0) {
    return teardown_in_batches(argv[0], argv[2], std::atoi(argv[3]), std::atoi(argv[4]), 256);
  }
  const double seconds = std::atof(argv[1]);
  const size_t reserve_mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024;
  if (seconds <= 0) {
    std::fprintf(stderr, "teardown_probe: SECONDS must be a positive number, got %s\n", argv[1]);
    return 1;
  }
  return judge(argv[0], seconds, reserve_mib);
}
