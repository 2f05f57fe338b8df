// kforge-nvrtc: one NVRTC compile at a time, for the compile service
// (nvrtc_worker_protocol.h). Long-lived, so that NVRTC's start-up (loading
// its builtins, a few hundred ms) is paid once per worker and compiles stay
// at NVRTC's warm speed; the service kills it on a timeout and starts a new
// one. Each request sets the data limit (RLIMIT_DATA, soft) that the
// compile runs under; NVRTC reports a failed allocation as
// NVRTC_ERROR_OUT_OF_MEMORY, or the worker dies, and either way the service
// says the compile exceeded its memory.
#include <malloc.h>
#include <nvrtc.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "compile/nvrtc_worker_protocol.h"
#include "ipc/child_process.h"
#include "ipc/wire.h"

namespace {

using kforge::ipc::Deadline;
using kforge::ipc::json;
namespace protocol = kforge::env::nvrtc_worker;

// Replies to a compile: blocking sends (the service always reads).
void reply(const json& body) { kforge::ipc::send_frame(protocol::kControlFd, body, Deadline::never()); }

// Frees the program on every path.
class Program {
 public:
  Program(const std::string& source, const std::string& name) {
    result_ = nvrtcCreateProgram(&prog_, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  }
  ~Program() {
    if (prog_ != nullptr) nvrtcDestroyProgram(&prog_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcResult created() const { return result_; }
  nvrtcProgram get() const { return prog_; }

 private:
  nvrtcProgram prog_ = nullptr;
  nvrtcResult result_ = NVRTC_SUCCESS;
};

std::string api_error(const char* what, nvrtcResult r) { return std::string(what) + ": " + nvrtcGetErrorString(r); }

// Sets the soft data limit for the next compile (0: none). Only the soft
// limit: the next request may need a higher one. RLIMIT_DATA, not RLIMIT_AS:
// the data limit counts the writable private memory a compile can actually
// use, while the address space also counts reservations nobody touches
// (glibc's per-thread malloc arenas reserve 64 MiB each, up to 8 per core):
// on the H200 machine's 16 cores NVRTC's own threads ran a fresh worker out
// of a 4 GiB address space on its first, tiny compile.
void limit_memory(uint64_t bytes) {
  rlimit current{};
  if (::getrlimit(RLIMIT_DATA, &current) != 0) return;
  current.rlim_cur = bytes == 0 ? current.rlim_max : std::min<rlim_t>(bytes, current.rlim_max);
  ::setrlimit(RLIMIT_DATA, &current);
}

// The CPU time this compile may use on top of what the worker has used
// (0: none). The service kills the worker at the compile's wall-clock limit;
// this is what ends a compile whose service died meanwhile (the worker has
// no parent-death signal, see main()).
void limit_cpu(double seconds) {
  rlimit current{};
  if (::getrlimit(RLIMIT_CPU, &current) != 0) return;
  rusage used{};
  ::getrusage(RUSAGE_SELF, &used);
  const double so_far = static_cast<double>(used.ru_utime.tv_sec + used.ru_stime.tv_sec) + 1;
  current.rlim_cur =
      seconds <= 0 ? current.rlim_max : std::min<rlim_t>(static_cast<rlim_t>(so_far + seconds), current.rlim_max);
  ::setrlimit(RLIMIT_CPU, &current);
}

uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

json compile(const json& request) {
  const std::string source = request.value("source", "");
  const std::string name = request.value("name", "kernel.cu");
  const auto args = request.value("args", std::vector<std::string>{});
  const auto names = request.value("names", std::vector<std::string>{});
  limit_memory(request.value("memory_limit_bytes", uint64_t{0}));
  limit_cpu(request.value("cpu_limit_s", 0.0));

  Program program(source, name);
  if (program.created() != NVRTC_SUCCESS)
    return {{"type", "error"}, {"message", api_error("nvrtcCreateProgram", program.created())}};
  for (const auto& n : names) {
    if (nvrtcResult r = nvrtcAddNameExpression(program.get(), n.c_str()); r != NVRTC_SUCCESS) {
      return {{"type", "error"}, {"message", api_error("nvrtcAddNameExpression", r)}};
    }
  }
  std::vector<const char*> c_args;
  for (const auto& a : args) c_args.push_back(a.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(program.get(), static_cast<int>(c_args.size()), c_args.data());

  json out = {
      {"type", "compiled"}, {"result", static_cast<int>(compiled)}, {"result_text", nvrtcGetErrorString(compiled)}};
  size_t log_size = 0;
  std::string log;
  if (nvrtcGetProgramLogSize(program.get(), &log_size) == NVRTC_SUCCESS && log_size > 0) {
    log.resize(log_size);
    if (nvrtcGetProgramLog(program.get(), log.data()) != NVRTC_SUCCESS) log.clear();
    while (!log.empty() && log.back() == '\0') log.pop_back();
    if (log.size() > protocol::kMaxLogBytes) {
      log.resize(protocol::kMaxLogBytes);
      log += "\n[log truncated]\n";
    }
  }
  out["log"] = log;
  if (compiled == NVRTC_SUCCESS) {
    json lowered = json::array();
    for (const auto& n : names) {
      const char* l = nullptr;
      if (nvrtcGetLoweredName(program.get(), n.c_str(), &l) == NVRTC_SUCCESS && l != nullptr) {
        lowered.push_back(l);
      } else {
        lowered.push_back(nullptr);
      }
    }
    out["lowered"] = lowered;
    size_t size = 0;
    if (nvrtcResult r = nvrtcGetCUBINSize(program.get(), &size); r != NVRTC_SUCCESS) {
      return {{"type", "error"}, {"message", api_error("nvrtcGetCUBINSize", r)}};
    }
    std::vector<uint8_t> cubin(size);
    if (nvrtcResult r = nvrtcGetCUBIN(program.get(), reinterpret_cast<char*>(cubin.data())); r != NVRTC_SUCCESS) {
      return {{"type", "error"}, {"message", api_error("nvrtcGetCUBIN", r)}};
    }
    out["cubin"] = json::binary(std::move(cubin));
  }
  return out;
}

// NVRTC's first compile in a process loads and sets up its builtins; doing
// it before `ready` keeps it off the first real request.
void warm_up() {
  Program program("__global__ void kforge_warm_up(float* x) { x[threadIdx.x] += 1.0f; }\n", "warm_up.cu");
  const char* args[] = {"-default-device"};
  if (program.created() == NVRTC_SUCCESS) nvrtcCompileProgram(program.get(), 1, args);
}

}  // namespace

int main(int argc, char** argv) {
  long parent = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--parent-pid") parent = std::strtol(argv[i + 1], nullptr, 10);
  }
  if (parent <= 0) {
    std::fprintf(stderr, "usage: kforge-nvrtc --parent-pid PID (started by the compile service, fd 3)\n");
    return protocol::kUsageExitCode;
  }
  // No PR_SET_PDEATHSIG: it fires when the *thread* that started us ends,
  // and a worker is started by one compile thread and later used by others,
  // so a worker could be killed mid-compile, and that compile blamed on its
  // source. A worker whose service is gone reads the end of its socket and
  // exits; one that is compiling then is ended by its CPU-time limit.
  if (::getppid() != static_cast<pid_t>(parent)) return 0;
  // One compile at a time: a few malloc arenas are plenty (see limit_memory).
  ::mallopt(M_ARENA_MAX, 2);
  kforge::ipc::close_descriptors_from(protocol::kControlFd + 1);
  ::signal(SIGPIPE, SIG_IGN);
  warm_up();
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  try {
    reply({{"type", "ready"}, {"version", std::to_string(major) + "." + std::to_string(minor)}});
    while (true) {
      kforge::ipc::Frame frame = kforge::ipc::recv_frame(protocol::kControlFd, Deadline::never());
      const std::string type = frame.body.value("type", "");
      if (type == "shutdown") return 0;
      if (type != "compile") {
        reply({{"type", "error"}, {"message", "unknown request '" + type + "'"}});
        continue;
      }
      json out;
      try {
        out = compile(frame.body);
      } catch (const std::bad_alloc&) {
        out = {{"type", "compiled"},
               {"result", static_cast<int>(NVRTC_ERROR_OUT_OF_MEMORY)},
               {"result_text", "std::bad_alloc"},
               {"log", ""}};
      }
      limit_memory(0);
      limit_cpu(0);
      reply(out);
      // A compile that grew the heap leaves it to the next one otherwise.
      if (resident_bytes() > (uint64_t{256} << 20)) ::malloc_trim(0);
    }
  } catch (const kforge::ipc::WireError&) {
    return 0;  // the service went away
  }
}
