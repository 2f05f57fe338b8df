// kforge-judge: the per-device evaluation process (docs/architecture.md#isolation). Started by
// the Executor with its control socket on fd 3; makes inputs, computes
// references, drives sandboxed kforge-runner processes, compares and times.
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ipc/child_process.h"
#include "judge/judge_loop.h"

namespace {

// The judge is a long-lived service: when it dies, the Executor's log should
// say where. Faulting instruction, faulting address, the word on top of the
// stack (the caller, when a null function pointer was called) and a
// backtrace go to stderr (the Executor forwards it); then we die as before.
void describe_address(const char* what, const void* address) {
  Dl_info info{};
  char line[512];
  int n;
  if (address != nullptr && ::dladdr(address, &info) != 0 && info.dli_fname != nullptr) {
    n = std::snprintf(
        line, sizeof(line), "kforge-judge: %s %p = %s+%#lx (%s)\n", what, address, info.dli_fname,
        static_cast<unsigned long>(reinterpret_cast<uintptr_t>(address) - reinterpret_cast<uintptr_t>(info.dli_fbase)),
        info.dli_sname != nullptr ? info.dli_sname : "?");
  } else {
    n = std::snprintf(line, sizeof(line), "kforge-judge: %s %p\n", what, address);
  }
  ssize_t ignored = ::write(STDERR_FILENO, line, static_cast<size_t>(std::max(n, 0)));
  (void)ignored;
}

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  static const char kMessage[] = "kforge-judge: fatal signal, backtrace follows\n";
  ssize_t ignored = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
  describe_address("fault address", info->si_addr);
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  describe_address("instruction", reinterpret_cast<const void*>(uc->uc_mcontext.gregs[REG_RIP]));
  describe_address("top of stack", *reinterpret_cast<void* const*>(uc->uc_mcontext.gregs[REG_RSP]));
#endif
  void* frames[64];
  int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_crash_reporter() {
  void* warm[1];
  ::backtrace(warm, 1);  // loads the unwinder now, not inside the handler
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &sa, nullptr);
}

// What the executor passes on the command line (JudgeLaunch in env/src/exec).
struct Arguments {
  kforge::judge::JudgeLoopConfig config;
  long parent = 0;
  int cpu = -1;
};

uint64_t mib(const std::string& value) { return std::strtoull(value.c_str(), nullptr, 10) << 20; }

// False (after a message on stderr) on an unknown key.
bool apply_argument(const std::string& key, const std::string& value, Arguments* a) {
  kforge::judge::JudgeLoopConfig& c = a->config;
  if (key == "--backend") {
    c.backend = value;
  } else if (key == "--device") {
    c.device = std::atoi(value.c_str());
  } else if (key == "--runner") {
    c.runner = value;
  } else if (key == "--scratch") {
    c.scratch = value;
  } else if (key == "--gate-dir") {
    c.gate_dir = value;
  } else if (key == "--cpu") {
    a->cpu = std::atoi(value.c_str());
  } else if (key == "--parent-pid") {
    a->parent = std::strtol(value.c_str(), nullptr, 10);
  } else if (key == "--trim-above-mib") {
    c.memory.trim_above_bytes = mib(value);
  } else if (key == "--retire-above-mib") {
    c.memory.retire_above_bytes = mib(value);
  } else if (key == "--spares") {
    c.runner_spares = std::atoi(value.c_str());
  } else if (key == "--profiler-spares") {
    c.profiler_spares = std::atoi(value.c_str());
  } else if (key == "--runner-cuda-connections") {
    c.runner_cuda_connections = std::atoi(value.c_str());
  } else if (key == "--device-trim-above-mib") {
    c.memory.device_trim_above_bytes = mib(value);
  } else if (key == "--lane-device-memory-mib") {
    c.lane_memory.lane_bytes = mib(value);
  } else if (key == "--device-memory-reserve-mib") {
    c.lane_memory.reserve_bytes = mib(value);
  } else if (key == "--lanes-on-device") {
    c.lane_memory.lanes = std::max(1, std::atoi(value.c_str()));
  } else {
    std::fprintf(stderr, "kforge-judge: unknown argument %s\n", key.c_str());
    return false;
  }
  return true;
}

// A CPU slot (docs/execution.md, "Lanes"): this judge and the runners it
// spawns (they inherit the mask) stay on one core, so that slots do not
// migrate into each other's caches. Best effort: a core outside our
// allowed set leaves the mask as it was.
void pin_to_core(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
    std::fprintf(stderr, "kforge-judge: cannot pin to core %d; running unpinned\n", cpu);
  }
}

// How the judge's own process behaves while it serves: its heap, its
// dumpability, its threads.
void configure_process() {
  // Keep freed memory for reuse instead of returning it to the kernel. glibc
  // serves large blocks (every input, reference and temporary tensor) with a
  // fresh mmap and unmaps them on free, so each reference call would fault in
  // its temporaries page by page. On virtualized hosts a fault costs
  // microseconds: eager PyTorch measured up to 45x slower than its real work, which
  // inflated every speedup. With mmap off and no trimming, the heap keeps its
  // high-water mark (the largest evaluation's tensors) and reuses it warm,
  // up to the memory bound (memory_bound.h), above which freed memory is
  // returned after the request.
  ::mallopt(M_MMAP_MAX, 0);
  ::mallopt(M_TRIM_THRESHOLD, -1);
  // Not dumpable: a runner (same uid) cannot open /proc/<judge>/mem and read
  // reference outputs, even during its loading phase.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  // The reference runs single-threaded, like the candidate (which may not
  // create threads): speedups compare one core with one core.
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!apply_argument(argv[i], argv[i + 1], &args)) return 2;
  }
  if (args.config.runner.empty() || args.config.scratch.empty()) {
    std::fprintf(stderr,
                 "usage: kforge-judge --backend cpu|cuda --runner PATH --scratch DIR [--device N] [--gate-dir DIR]\n"
                 "                    [--cpu CORE] [--parent-pid PID] [--trim-above-mib N] [--retire-above-mib N]\n"
                 "                    [--device-trim-above-mib N] [--spares N] [--lane-device-memory-mib N]\n"
                 "                    [--device-memory-reserve-mib N] [--lanes-on-device N]\n"
                 "Started by the Executor with its control socket on fd 3.\n");
    return 2;
  }
  if (args.parent > 0) kforge::ipc::die_with_parent(static_cast<pid_t>(args.parent));
  if (args.cpu >= 0) pin_to_core(args.cpu);
  install_crash_reporter();
  configure_process();
  return kforge::judge::serve_executor(args.config, 3);
}
