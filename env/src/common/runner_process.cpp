#include "common/runner_process.h"

#include <fcntl.h>
#include <seccomp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <system_error>
#include <utility>

#include "common/errno_text.h"
#include "common/remove_tree.h"
#include "common/runner_protocol.h"
#include "common/wire.h"
#include "kforge/core/error.h"

namespace kforge::exec {
namespace {

std::atomic<uint64_t> g_runner_counter{0};

// How long a runner whose control socket closed gets to finish exiting before
// it is killed: it is normally already in exit(), this only bounds a runner
// that closed its socket on purpose and kept running.
constexpr double kExitGraceMs = 1000;

}  // namespace

std::string syscall_name(int number) {
  char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, number);
  if (name == nullptr) return "syscall " + std::to_string(number);
  std::string s(name);
  std::free(name);
  return s;
}

const char* runner_status_name(RunnerReply::Status status) {
  switch (status) {
    case RunnerReply::Status::kOk:
      return "ok";
    case RunnerReply::Status::kError:
      return "error";
    case RunnerReply::Status::kCrashed:
      return "crashed";
    case RunnerReply::Status::kTimedOut:
      return "timed_out";
    case RunnerReply::Status::kSandbox:
      return "sandbox";
    case RunnerReply::Status::kProtocol:
      return "protocol";
  }
  return "unknown";
}

std::unique_ptr<RunnerProcess> RunnerProcess::spawn(const Config& config) {
  std::unique_ptr<RunnerProcess> r(new RunnerProcess());
  r->reply_spin_us_ = std::max(config.reply_spin_us, 0);
  r->scratch_ = config.scratch_root /
                ("runner-" + std::to_string(::getpid()) + "-" + std::to_string(g_runner_counter.fetch_add(1)));
  std::error_code ec;
  std::filesystem::create_directories(config.scratch_root, ec);
  if (::mkdir(r->scratch_.c_str(), 0700) != 0) {
    throw SystemError("cannot create runner scratch dir " + r->scratch_.string() + ": " + errno_text(errno));
  }
  // From here on the destructor removes the dir, whatever fails.
  UniqueFd output(::open((r->scratch_ / "output.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!output || !devnull) throw SystemError("cannot open runner output file: " + errno_text(errno));
  UniqueFd theirs;
  make_socket_pair(&r->control_, &theirs);

  SpawnSpec spec;
  spec.executable = config.executable;
  spec.args = {"--backend",          config.backend, "--scratch",
               r->scratch_.string(), "--parent-pid", std::to_string(::getpid())};
  if (config.backend != "cpu") {
    spec.args.insert(spec.args.end(),
                     {"--device", std::to_string(config.device), "--profiler", config.profiler ? "1" : "0"});
  }
  spec.fds = {{0, devnull.get()}, {1, output.get()}, {2, output.get()}, {runner_protocol::kControlFd, theirs.get()}};
  r->child_ = ChildProcess::spawn(spec);
  r->has_cpu_clock_ = ::clock_getcpuclockid(r->child_.pid(), &r->cpu_clock_) == 0;
  return r;
}

RunnerProcess::~RunnerProcess() { terminate(); }

bool RunnerProcess::check_alive() {
  child_.poll_exit();
  return alive();
}

void RunnerProcess::terminate() {
  if (terminated_) return;
  terminated_ = true;
  control_.reset();
  child_.kill_and_reap();
  if (!scratch_.empty()) {
    final_output_ = read_output_tail(4096);
    remove_tree(scratch_);
  }
}

std::string RunnerProcess::read_output_tail(size_t max_bytes) const {
  std::ifstream in(scratch_ / "output.log", std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  std::streamoff start =
      size > static_cast<std::streamoff>(max_bytes) ? size - static_cast<std::streamoff>(max_bytes) : 0;
  in.seekg(start);
  std::string s(static_cast<size_t>(size - start), '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  return s;
}

std::string RunnerProcess::output_tail(size_t max_bytes) const {
  std::string s = terminated_ ? final_output_ : read_output_tail(max_bytes);
  if (s.size() > max_bytes) s.erase(0, s.size() - max_bytes);
  return s;
}

double RunnerProcess::runner_cpu_ms() const {
  timespec ts{};
  if (!has_cpu_clock_ || ::clock_gettime(cpu_clock_, &ts) != 0) return -1;
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

RunnerReply RunnerProcess::fail(RunnerReply reply) {
  control_.reset();
  if (reply.status == RunnerReply::Status::kCrashed) {
    // The socket closed because the runner is exiting: collect its real status
    // before deciding what to say.
    auto status = child_.wait_for(kExitGraceMs);
    if (status) {
      reply.detail = describe_exit_status(*status);
    } else {
      reply.detail = "closed its control channel and kept running (killed)";
    }
  }
  terminate();
  return reply;
}

namespace {

RunnerReply not_running() {
  RunnerReply reply;
  reply.status = RunnerReply::Status::kCrashed;
  reply.detail = "runner is not running";
  return reply;
}

}  // namespace

RunnerReply RunnerProcess::await_started(Deadline deadline) {
  if (started_) return {};
  if (!alive()) return not_running();
  RunnerReply reply = converse(nullptr, {}, "started", 0, deadline);
  started_ = reply.ok();
  return reply;
}

RunnerReply RunnerProcess::exchange(json request, const std::string& expected_type, Deadline deadline,
                                    const std::vector<int>& fds) {
  if (!alive()) return not_running();
  if (RunnerReply started = await_started(deadline); !started.ok()) return started;
  uint64_t seq = ++seq_;
  request["seq"] = seq;
  return converse(&request, fds, expected_type, seq, deadline);
}

RunnerReply RunnerProcess::converse(const json* request, const std::vector<int>& fds, const std::string& expected_type,
                                    uint64_t seq, Deadline deadline) {
  RunnerReply reply;
  double cpu_start = runner_cpu_ms();
  auto start = std::chrono::steady_clock::now();
  try {
    if (request != nullptr) send_frame(control_.get(), *request, deadline, fds);
    Frame frame = recv_frame(control_.get(), deadline, reply_spin_us_);
    reply.round_trip_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    double cpu_end = runner_cpu_ms();
    if (cpu_start >= 0 && cpu_end >= 0) reply.cpu_ms = cpu_end - cpu_start;
    const json& body = frame.body;
    std::string type = body.value("type", "");
    if (type == "sandbox") {
      reply.status = RunnerReply::Status::kSandbox;
      reply.syscall = syscall_name(body.value("syscall", -1));
      reply.detail = "blocked syscall " + reply.syscall;
      if (std::string arg = body.value("arg", ""); !arg.empty()) reply.detail += " (" + arg + ")";
      return fail(std::move(reply));
    }
    if (body.value("seq", uint64_t{0}) != seq || (type != expected_type && type != "error")) {
      reply.status = RunnerReply::Status::kProtocol;
      reply.detail = "expected '" + expected_type + "' #" + std::to_string(seq) + ", got '" + type + "' #" +
                     std::to_string(body.value("seq", uint64_t{0}));
      return fail(std::move(reply));
    }
    if (type == "error") {
      reply.status = RunnerReply::Status::kError;
      reply.detail = body.value("message", "");
      reply.body = body;
      return reply;
    }
    reply.body = body;
    return reply;
  } catch (const WireError& e) {
    reply.round_trip_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    switch (e.kind()) {
      case WireError::Kind::kTimeout:
        reply.status = RunnerReply::Status::kTimedOut;
        reply.detail = "no reply within the time limit";
        break;
      case WireError::Kind::kClosed:
      case WireError::Kind::kIo:
        reply.status = RunnerReply::Status::kCrashed;
        break;
      case WireError::Kind::kMalformed:
        reply.status = RunnerReply::Status::kProtocol;
        reply.detail = e.what();
        break;
    }
    return fail(std::move(reply));
  }
}

RunnerCandidate RunnerCandidate::shared_object(std::filesystem::path library) {
  RunnerCandidate c;
  c.library = std::move(library);
  return c;
}

RunnerCandidate RunnerCandidate::nvrtc(std::filesystem::path cubin, json launch,
                                       std::vector<std::string> tensor_names) {
  RunnerCandidate c;
  c.cubin = std::move(cubin);
  c.launch = std::move(launch);
  c.tensor_names = std::move(tensor_names);
  return c;
}

json setup_request(const RunnerCandidate& candidate, const RunnerLimits& limits, const json& arena) {
  json request = {{"type", "setup"},
                  {"limits",
                   {{"memory_bytes", limits.memory_bytes},
                    {"cpu_seconds", limits.cpu_seconds},
                    {"output_bytes", limits.output_bytes},
                    {"open_files", limits.open_files}}},
                  {"arena", arena}};
  if (candidate.cubin.empty()) {
    request["library"] = candidate.library.string();
  } else {
    request["cubin"] = candidate.cubin.string();
    request["launch"] = candidate.launch;
    request["tensors"] = candidate.tensor_names;
  }
  return request;
}

RunnerReply RunnerProcess::setup(const RunnerCandidate& candidate, const RunnerLimits& limits, const json& arena,
                                 const std::vector<int>& fds, Deadline deadline) {
  return exchange(setup_request(candidate, limits, arena), "ready", deadline, fds);
}

RunnerReply RunnerProcess::bind(const json& inputs, const json& outputs, Deadline deadline) {
  return exchange({{"type", "bind"}, {"inputs", inputs}, {"outputs", outputs}}, "bound", deadline);
}

RunnerReply RunnerProcess::call(bool null_call, Deadline deadline, const json& options) {
  json request = options;
  request["type"] = "call";
  request["null"] = null_call;
  return exchange(std::move(request), "done", deadline);
}

RunnerReply RunnerProcess::profile(const json& request, Deadline deadline) {
  json message = request;
  message["type"] = "profile";
  return exchange(std::move(message), "profiled", deadline);
}

}  // namespace kforge::exec
