#include "judge/runner_process.h"

#include <fcntl.h>
#include <seccomp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>
#include <system_error>
#include <utility>

#include "ipc/build_identity.h"
#include "ipc/runner_protocol.h"
#include "ipc/wire.h"
#include "judge/json_fields.h"
#include "kforge/core/elapsed.h"
#include "kforge/core/errno_text.h"
#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"

namespace kforge::judge {
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
  r->tracer_ = config.tracer;
  r->executable_ = config.executable;
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
  ipc::make_socket_pair(&r->control_, &theirs);

  ipc::SpawnSpec spec;
  spec.executable = config.executable;
  spec.args = {"--backend",          config.backend, "--scratch",
               r->scratch_.string(), "--parent-pid", std::to_string(::getpid())};
  if (config.backend != "cpu") {
    spec.args.insert(spec.args.end(),
                     {"--device", std::to_string(config.device), "--profiler", config.profiler ? "1" : "0"});
    if (config.tracer) spec.args.insert(spec.args.end(), {"--tracer", "1"});
    if (config.cuda_connections > 0) {
      spec.args.insert(spec.args.end(), {"--cuda-connections", std::to_string(config.cuda_connections)});
    }
  }
  spec.fds = {
      {0, devnull.get()}, {1, output.get()}, {2, output.get()}, {ipc::runner_protocol::kControlFd, theirs.get()}};
  r->child_ = ipc::ChildProcess::spawn(spec);
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
  // The candidate's bytes, bound for reports written as JSON.
  return to_valid_utf8(s);
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
      reply.detail = ipc::describe_exit_status(*status);
    } else {
      reply.detail = "closed its control channel and kept running (killed)";
    }
  }
  terminate();
  return reply;
}

namespace {

RunnerReply not_running(bool candidate_ran) {
  RunnerReply reply;
  reply.status = RunnerReply::Status::kCrashed;
  reply.detail = "runner is not running";
  reply.candidate_ran = candidate_ran;
  return reply;
}

}  // namespace

RunnerReply RunnerProcess::await_started(ipc::Deadline deadline) {
  if (started_) return {};
  if (!alive()) return not_running(candidate_ran_);
  RunnerReply reply = converse(nullptr, {}, "started", 0, deadline);
  if (reply.ok()) {
    // A runner of another build may read `setup` differently (build_identity.h);
    // nothing of a candidate has run in it, so this is the harness's failure.
    const std::string why = ipc::protocol_mismatch(
        "the runner " + executable_.string(), "runner protocol", integer_or(reply.body, "protocol", 1),
        string_or(reply.body, "build", ""), ipc::kRunnerProtocolVersion,
        "build kforge-runner together with kforge-judge, or point executor.tools_dir (KFORGE_TOOLS_DIR) at a "
        "directory with both from one build");
    if (!why.empty()) {
      reply.status = RunnerReply::Status::kError;
      reply.detail = why;
      return fail(std::move(reply));
    }
  }
  started_ = reply.ok();
  return reply;
}

RunnerReply RunnerProcess::exchange(json request, const std::string& expected_type, ipc::Deadline deadline,
                                    const std::vector<int>& fds) {
  if (!alive()) return not_running(candidate_ran_);
  if (RunnerReply started = await_started(deadline); !started.ok()) return started;
  uint64_t seq = ++seq_;
  request["seq"] = seq;
  return converse(&request, fds, expected_type, seq, deadline);
}

namespace {

// Rules for the fields each reply type may carry (runner_protocol.h); a field
// not listed is never read.
std::string done_problem(const json& body) {
  std::string problem = check_fields(body, {{"rc", FieldKind::kInteger, true},
                                            {"self_ns", FieldKind::kUnsigned, true},
                                            {"device_ns", FieldKind::kUnsigned},
                                            {"drain_ns", FieldKind::kUnsigned},
                                            {"graph", FieldKind::kObject},
                                            {"launch_gate", FieldKind::kString},
                                            {"null_work", FieldKind::kString},
                                            {"foreign_pending", FieldKind::kBoolean}});
  if (!problem.empty()) return problem;
  const int64_t rc = body["rc"].get<int64_t>();
  if (rc < INT32_MIN || rc > INT32_MAX) return "field 'rc' is " + std::to_string(rc) + ", not an int";
  if (body.contains("graph")) {
    return check_fields(body["graph"], {{"used", FieldKind::kBoolean, true}, {"reason", FieldKind::kString}}, "graph");
  }
  return "";
}

}  // namespace

std::string reply_problem(const std::string& type, const json& body) {
  if (type == "done") return done_problem(body);
  if (type == "ready") return check_fields(body, {{"sandbox", FieldKind::kObject}, {"phase_ms", FieldKind::kObject}});
  if (type == "profiled") return check_fields(body, {{"profile", FieldKind::kObject, true}});
  if (type == "error") {
    return check_fields(body, {{"stage", FieldKind::kString, true}, {"message", FieldKind::kString, true}});
  }
  if (type == "sandbox")
    return check_fields(body, {{"syscall", FieldKind::kInteger, true}, {"arg", FieldKind::kString}});
  return "";
}

namespace {

std::string a_reply(const std::string& type) {
  const bool vowel = !type.empty() && std::string("aeiou").find(type[0]) != std::string::npos;
  return std::string(vowel ? "an '" : "a '") + type + "' reply";
}

// What is wrong with a frame's envelope (its type and seq, its size, the
// fields its type needs), or "". Sets *type; makes the body valid UTF-8.
std::string envelope_problem(ipc::Frame& frame, std::string* type) {
  json& body = frame.body;
  if (std::string problem = check_fields(body, {{"type", FieldKind::kString, true}, {"seq", FieldKind::kUnsigned}});
      !problem.empty()) {
    return "a reply whose " + problem;
  }
  *type = to_valid_utf8(body["type"].get<std::string>());
  if (type->size() > 64) return "a reply of an unknown type of " + std::to_string(type->size()) + " bytes";
  if (*type != "profiled" && frame.payload_bytes > kMaxReplyBytes) {
    return a_reply(*type) + " of " + std::to_string(frame.payload_bytes) + " bytes (the limit is " +
           std::to_string(kMaxReplyBytes) + ")";
  }
  make_valid_utf8(&body);
  if (std::string problem = reply_problem(*type, body); !problem.empty()) return a_reply(*type) + " whose " + problem;
  return "";
}

// The seccomp filter stopped a system call: the runner names it.
void fill_sandbox_reply(const json& body, RunnerReply* reply) {
  reply->status = RunnerReply::Status::kSandbox;
  reply->syscall =
      syscall_name(static_cast<int>(std::clamp<int64_t>(body["syscall"].get<int64_t>(), INT32_MIN, INT32_MAX)));
  reply->detail = "blocked syscall " + reply->syscall;
  if (std::string arg = string_or(body, "arg", ""); !arg.empty()) reply->detail += " (" + arg + ")";
}

// It leads the report's one-line summary: the candidate's exception text
// must not make that line 64 KiB long.
std::string bounded_error_message(const json& body) {
  std::string message = body["message"].get<std::string>();
  if (message.size() > kMaxErrorMessageBytes) {
    message = to_valid_utf8(std::string_view(message).substr(0, kMaxErrorMessageBytes)) + " [truncated]";
  }
  return message;
}

void fill_wire_failure(const ipc::WireError& e, RunnerReply* reply) {
  switch (e.kind()) {
    case ipc::WireError::Kind::kTimeout:
      reply->status = RunnerReply::Status::kTimedOut;
      reply->detail = "no reply within the time limit";
      break;
    case ipc::WireError::Kind::kClosed:
    case ipc::WireError::Kind::kIo:
      reply->status = RunnerReply::Status::kCrashed;
      break;
    case ipc::WireError::Kind::kMalformed:
      reply->status = RunnerReply::Status::kProtocol;
      reply->detail = e.what();
      break;
  }
}

}  // namespace

RunnerReply RunnerProcess::converse(const json* request, const std::vector<int>& fds, const std::string& expected_type,
                                    uint64_t seq, ipc::Deadline deadline) {
  RunnerReply reply;
  double cpu_start = runner_cpu_ms();
  auto start = std::chrono::steady_clock::now();
  // Whatever the runner sends is read as the candidate's: from `loading` on,
  // candidate code runs in it and can write any frame to this socket.
  auto tamper = [&](std::string detail) {
    reply.status = RunnerReply::Status::kProtocol;
    reply.detail = std::move(detail);
    reply.candidate_ran = candidate_ran_;
    return fail(std::move(reply));
  };
  try {
    if (request != nullptr) ipc::send_frame(control_.get(), *request, deadline, fds);
    // `setup` may be answered by `loading` (the candidate's code is about to
    // run) before its real reply.
    bool loading_allowed = expected_type == "ready";
    while (true) {
      ipc::Frame frame = ipc::recv_frame(control_.get(), deadline, reply_spin_us_);
      reply.round_trip_ms = ms_since(start);
      double cpu_end = runner_cpu_ms();
      if (cpu_start >= 0 && cpu_end >= 0) reply.cpu_ms = cpu_end - cpu_start;
      std::string type;
      if (std::string problem = envelope_problem(frame, &type); !problem.empty()) return tamper(problem);
      json& body = frame.body;
      if (type == "sandbox") {
        fill_sandbox_reply(body, &reply);
        reply.candidate_ran = candidate_ran_;
        return fail(std::move(reply));
      }
      const uint64_t got_seq = unsigned_or(body, "seq", 0);
      if (type == "loading" && loading_allowed && got_seq == seq) {
        loading_allowed = false;
        candidate_ran_ = true;
        continue;
      }
      if (got_seq != seq || (type != expected_type && (type != "error" || seq == 0))) {
        return tamper("expected '" + expected_type + "' #" + std::to_string(seq) + ", got '" + type + "' #" +
                      std::to_string(got_seq));
      }
      reply.candidate_ran = candidate_ran_;
      if (type == "error") {
        reply.status = RunnerReply::Status::kError;
        reply.detail = bounded_error_message(body);
      }
      reply.body = std::move(body);
      return reply;
    }
  } catch (const ipc::WireError& e) {
    reply.round_trip_ms = ms_since(start);
    reply.candidate_ran = candidate_ran_;
    fill_wire_failure(e, &reply);
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
                    {"open_files", limits.open_files},
                    {"device_memory_bytes", limits.device_memory_bytes}}},
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
                                 const std::vector<int>& fds, ipc::Deadline deadline) {
  return exchange(setup_request(candidate, limits, arena), "ready", deadline, fds);
}

RunnerReply RunnerProcess::bind(const json& inputs, const json& outputs, ipc::Deadline deadline) {
  return exchange({{"type", "bind"}, {"inputs", inputs}, {"outputs", outputs}}, "bound", deadline);
}

RunnerReply RunnerProcess::call(bool null_call, ipc::Deadline deadline, const json& options) {
  json request = options;
  request["type"] = "call";
  request["null"] = null_call;
  return exchange(std::move(request), "done", deadline);
}

RunnerReply RunnerProcess::profile(const json& request, ipc::Deadline deadline) {
  json message = request;
  message["type"] = "profile";
  return exchange(std::move(message), "profiled", deadline);
}

}  // namespace kforge::judge
