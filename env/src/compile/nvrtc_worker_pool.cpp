#include "nvrtc_worker_pool.h"

#include <fcntl.h>
#include <nvrtc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>

#include "ipc/child_process.h"
#include "ipc/wire.h"
#include "kforge/core/elapsed.h"
#include "kforge/core/error.h"
#include "kforge/core/unique_fd.h"
#include "nvrtc_worker_protocol.h"

namespace kforge::env {
namespace {

using ipc::Deadline;
using ipc::json;
using Clock = std::chrono::steady_clock;

// NVRTC loads and warms up before the worker says `ready` (~0.3 s on an idle
// machine); this only bounds a worker that cannot start at all.
constexpr double kStartupLimitMs = 120000;
// A worker is replaced after this many compiles, bounding whatever NVRTC
// keeps between programs.
constexpr int kMaxCompilesPerWorker = 1000;

bool is_executable(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

struct NvrtcWorkerPool::Worker {
  ipc::ChildProcess child;
  UniqueFd control;
  bool ready = false;
  int compiles = 0;
};

std::filesystem::path find_nvrtc_worker() {
  if (const char* file = std::getenv("KFORGE_NVRTC_WORKER"); file != nullptr && *file != '\0') {
    if (is_executable(file)) return file;
    throw SystemError(std::string("$KFORGE_NVRTC_WORKER (") + file + ") is not an executable file");
  }
  std::vector<std::filesystem::path> dirs;
  if (const char* env = std::getenv("KFORGE_TOOLS_DIR"); env != nullptr && *env != '\0') dirs.emplace_back(env);
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back(self.parent_path());
  dirs.emplace_back(KFORGE_TOOLS_BUILD_DIR_DEFAULT);
  std::string tried;
  for (const auto& dir : dirs) {
    if (is_executable(dir / "kforge-nvrtc")) return dir / "kforge-nvrtc";
    tried += (tried.empty() ? "" : ", ") + dir.string();
  }
  throw SystemError("kforge-nvrtc (the NVRTC compile worker) not found (looked in: " + tried +
                    "); build it or set KFORGE_TOOLS_DIR or KFORGE_NVRTC_WORKER");
}

NvrtcWorkerPool::NvrtcWorkerPool(std::filesystem::path executable) : executable_(std::move(executable)) {}

NvrtcWorkerPool::~NvrtcWorkerPool() {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.clear();  // ChildProcess kills and reaps
}

int NvrtcWorkerPool::started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_;
}

int NvrtcWorkerPool::replaced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return replaced_;
}

std::string NvrtcWorkerPool::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

std::unique_ptr<NvrtcWorkerPool::Worker> NvrtcWorkerPool::spawn() {
  auto w = std::make_unique<Worker>();
  UniqueFd theirs;
  ipc::make_socket_pair(&w->control, &theirs);
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull) throw SystemError("cannot open /dev/null for kforge-nvrtc");
  ipc::SpawnSpec spec;
  spec.executable = executable_;
  spec.args = {"--parent-pid", std::to_string(::getpid())};
  // stderr stays ours: a worker that cannot start says why there.
  spec.fds = {{0, devnull.get()}, {1, devnull.get()}, {2, STDERR_FILENO}, {nvrtc_worker::kControlFd, theirs.get()}};
  w->child = ipc::ChildProcess::spawn(spec);
  std::lock_guard<std::mutex> lock(mu_);
  ++started_;
  return w;
}

void NvrtcWorkerPool::prestart() {
  std::unique_ptr<Worker> w = spawn();
  give_back(std::move(w));
}

std::unique_ptr<NvrtcWorkerPool::Worker> NvrtcWorkerPool::take() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!idle_.empty()) {
      std::unique_ptr<Worker> w = std::move(idle_.back());
      idle_.pop_back();
      // One that died while idle (its parent thread ended, or it was killed)
      // is reaped here.
      if (!w->child.poll_exit()) return w;
      ++replaced_;
    }
  }
  return spawn();
}

void NvrtcWorkerPool::give_back(std::unique_ptr<Worker> worker) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(worker));
}

namespace {

json compile_message(const NvrtcWorkerPool::Request& request) {
  return {{"type", "compile"},
          {"source", request.source},
          {"name", request.name},
          {"args", request.args},
          {"names", request.names},
          {"memory_limit_bytes", request.memory_limit_bytes},
          {"cpu_limit_s", request.timeout_s + 5}};
}

// The worker died mid-compile. NVRTC aborts when an allocation fails under
// the limit; a worker with a memory limit that died is reported as having
// exceeded it.
NvrtcWorkerPool::Result::Status death_status(const NvrtcWorkerPool::Request& request, std::optional<int> status) {
  if (request.memory_limit_bytes > 0 && status && WIFSIGNALED(*status) &&
      (WTERMSIG(*status) == SIGABRT || WTERMSIG(*status) == SIGSEGV || WTERMSIG(*status) == SIGKILL)) {
    return NvrtcWorkerPool::Result::Status::kOutOfMemory;
  }
  return NvrtcWorkerPool::Result::Status::kCrashed;
}

// A "compiled" reply: NVRTC's result and log, the CUBIN, the lowered names.
NvrtcWorkerPool::Result compiled_result(const json& body) {
  NvrtcWorkerPool::Result r;
  r.nvrtc_result = body.value("result", 0);
  r.result_text = body.value("result_text", "");
  r.log = body.value("log", "");
  if (body.contains("cubin") && body["cubin"].is_binary()) {
    const auto& bin = body["cubin"].get_binary();
    r.cubin.assign(bin.begin(), bin.end());
  }
  for (const auto& l : body.value("lowered", json::array())) {
    r.lowered.push_back(l.is_string() ? std::optional<std::string>(l.get<std::string>()) : std::nullopt);
  }
  return r;
}

}  // namespace

NvrtcWorkerPool::Result NvrtcWorkerPool::compile(const Request& request) {
  const auto start = Clock::now();
  std::unique_ptr<Worker> w = take();
  auto lose = [&](Result::Status status, std::string detail) {
    Result r;
    r.status = status;
    r.detail = std::move(detail);
    w->control.reset();
    w->child.kill_and_reap();
    std::lock_guard<std::mutex> lock(mu_);
    ++replaced_;
    r.wall_ms = ms_since(start);
    return r;
  };
  if (!w->ready) {
    try {
      ipc::Frame hello = ipc::recv_frame(w->control.get(), Deadline::after_ms(kStartupLimitMs));
      if (hello.body.value("type", "") != "ready") throw SystemError("kforge-nvrtc sent no 'ready'");
      w->ready = true;
      std::lock_guard<std::mutex> lock(mu_);
      version_ = hello.body.value("version", "");
    } catch (const ipc::WireError& e) {
      std::optional<int> status = w->child.wait_for(1000);
      w->child.kill_and_reap();
      throw SystemError(std::string("kforge-nvrtc did not start (") + e.what() +
                        (status ? ", " + ipc::describe_exit_status(*status) : std::string()) + ")");
    }
  }
  const json message = compile_message(request);
  ipc::Frame reply;
  // The time limit counts from the request: a worker that was still
  // starting does not eat into it.
  try {
    ipc::send_frame(w->control.get(), message, Deadline::after_ms(30000));
    reply = ipc::recv_frame(w->control.get(), Deadline::after_ms(request.timeout_s * 1000));
  } catch (const ipc::WireError& e) {
    if (e.kind() == ipc::WireError::Kind::kTimeout) return lose(Result::Status::kTimedOut, "");
    const std::optional<int> status = w->child.wait_for(1000);
    const std::string how = status ? ipc::describe_exit_status(*status) : std::string(e.what());
    return lose(death_status(request, status), how);
  }
  const json& body = reply.body;
  const std::string type = body.value("type", "");
  if (type == "error") {
    const std::string message_text = body.value("message", "");
    give_back(std::move(w));
    throw SystemError("NVRTC: " + message_text);
  }
  if (type != "compiled") {
    lose(Result::Status::kCrashed, "");
    throw SystemError("kforge-nvrtc answered '" + type + "' instead of 'compiled'");
  }
  Result r = compiled_result(body);
  r.wall_ms = ms_since(start);
  // Under its data limit NVRTC's front end reports a failed allocation as a
  // compilation error whose log says "out of memory" (the H200 machine's
  // NVRTC and this one alike); only with a limit set is that the limit.
  const bool front_end_out_of_memory = request.memory_limit_bytes > 0 && r.nvrtc_result != NVRTC_SUCCESS &&
                                       r.log.find("out of memory") != std::string::npos;
  if (r.nvrtc_result == NVRTC_ERROR_OUT_OF_MEMORY || front_end_out_of_memory) {
    // The worker survived, but its heap may hold what the compile grew.
    Result oom = lose(Result::Status::kOutOfMemory, r.result_text);
    oom.log = r.log;
    return oom;
  }
  if (++w->compiles >= kMaxCompilesPerWorker) {
    w->child.kill_and_reap();
  } else {
    give_back(std::move(w));
  }
  return r;
}

}  // namespace kforge::env
