#include "exec/judge_connection.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ipc/build_identity.h"
#include "ipc/wire.h"
#include "kforge/core/error.h"

namespace kforge::exec {
namespace {

constexpr double kShutdownGraceMs = 2000;

}  // namespace

// A judge of another build may read our frames differently (build_identity.h):
// it is not used, and restarting it helps nothing.
void JudgeConnection::refuse_another_build(const JudgeLaunch& launch, const nlohmann::json& hello) {
  const auto protocol = hello.find("protocol");
  const int theirs = protocol != hello.end() && protocol->is_number_integer() ? protocol->get<int>() : 1;
  const auto build = hello.find("build");
  const std::string their_build = build != hello.end() && build->is_string() ? build->get<std::string>() : "";
  const std::string why = ipc::protocol_mismatch(
      "the judge " + launch.judge.string(), "judge protocol", theirs, their_build, ipc::kJudgeProtocolVersion,
      "build kforge-judge and kforge-runner together with this program, or point executor.tools_dir "
      "(KFORGE_TOOLS_DIR) at the ones built with it");
  if (why.empty()) return;
  fatal_ = true;
  fatal_reason_ = why;
  stop();
  throw JudgeFailure(why);
}

namespace {

// The judge's command line: what `launch` sets that the judge reads from
// its arguments (judge/main.cpp); a count left at 0 is the judge's default.
std::vector<std::string> judge_arguments(const JudgeLaunch& launch) {
  std::vector<std::string> args = {"--backend",
                                   launch.backend,
                                   "--device",
                                   std::to_string(launch.device),
                                   "--runner",
                                   launch.runner.string(),
                                   "--scratch",
                                   launch.scratch.string(),
                                   "--parent-pid",
                                   std::to_string(::getpid()),
                                   "--trim-above-mib",
                                   std::to_string(launch.trim_above_bytes >> 20),
                                   "--retire-above-mib",
                                   std::to_string(launch.retire_above_bytes >> 20),
                                   "--device-trim-above-mib",
                                   std::to_string(launch.device_trim_above_bytes >> 20)};
  if (launch.backend == "cuda") {
    args.insert(args.end(), {"--lane-device-memory-mib", std::to_string(launch.lane_device_memory_bytes >> 20),
                             "--device-memory-reserve-mib", std::to_string(launch.device_memory_reserve_bytes >> 20),
                             "--lanes-on-device", std::to_string(launch.lanes_on_device), "--runner-cuda-connections",
                             std::to_string(launch.runner_cuda_connections)});
  }
  if (!launch.gate_dir.empty()) args.insert(args.end(), {"--gate-dir", launch.gate_dir.string()});
  if (launch.cpu >= 0) args.insert(args.end(), {"--cpu", std::to_string(launch.cpu)});
  if (launch.runner_spares > 0) {
    args.insert(args.end(), {"--spares", std::to_string(launch.runner_spares)});
  }
  if (launch.profiler_spares > 0) {
    args.insert(args.end(), {"--profiler-spares", std::to_string(launch.profiler_spares)});
  }
  return args;
}

}  // namespace

void JudgeConnection::start(const JudgeLaunch& launch) {
  stop();
  fatal_ = false;
  fatal_reason_.clear();
  UniqueFd ours, theirs;
  ipc::make_socket_pair(&ours, &theirs);
  UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ipc::SpawnSpec spec;
  spec.executable = launch.judge;
  spec.args = judge_arguments(launch);
  // The judge's stdout and stderr (libtorch warnings, crash messages) go to our stderr.
  spec.fds = {{0, devnull.get()}, {1, STDERR_FILENO}, {2, STDERR_FILENO}, {3, theirs.get()}};
  try {
    child_ = ipc::ChildProcess::spawn(spec);
  } catch (const SystemError& e) {
    throw JudgeFailure(e.what());
  }
  // Only the judge may hold its end: a judge that dies before its hello must
  // read as a closed channel now, not as silence until the start-up timeout.
  theirs.reset();
  {
    std::lock_guard<std::mutex> lock(control_mutex_);
    control_ = std::move(ours);
  }
  ipc::Frame hello;
  try {
    hello = ipc::recv_frame(control_.get(), ipc::Deadline::after_ms(launch.startup_timeout_ms));
    if (hello.body.value("type", "") == "waiting" && hello.body.value("for", "") == "gpu_gate") {
      // The judge queues for the GPU gate before it creates its context:
      // other judges' timings go first (gpu_gate.h). That wait is theirs,
      // bounded by their request deadlines, not this judge's start-up, so
      // it gets its own limit on top of the start-up's.
      hello = ipc::recv_frame(control_.get(), ipc::Deadline::after_ms(kGateWaitLimitMs + launch.startup_timeout_ms));
    }
  } catch (const ipc::WireError& e) {
    fail(std::string("judge did not start: ") + e.what());
  }
  if (hello.body.value("type", "") != "hello")
    fail("judge sent '" + hello.body.value("type", "") + "' instead of hello");
  refuse_another_build(launch, hello.body);
  if (const auto count = hello.body.find("device_count"); count != hello.body.end() && count->is_number_integer()) {
    device_count_ = count->get<int>();
  }
  if (!hello.body.value("ok", false)) {
    fatal_ = true;
    fatal_reason_ = "judge cannot use its device: " + hello.body.value("error", "unknown error");
    stop();
    throw JudgeFailure(fatal_reason_);
  }
  device_name_ = hello.body.value("device", "");
  versions_ = hello.body.value("versions", nlohmann::json::object());
}

nlohmann::json JudgeConnection::exchange(const nlohmann::json& message, ipc::Deadline deadline) {
  if (!running() || !control_) throw JudgeFailure("judge is not running");
  try {
    ipc::send_frame(control_.get(), message, deadline);
    double moved_ms = 0;
    while (true) {
      ipc::Frame reply = ipc::recv_frame(control_.get(), deadline);
      if (reply.body.value("type", "") != "waiting") return std::move(reply.body);
      // The judge is queued for the GPU gate behind other candidates'
      // timings (judge_loop.cpp, QueueNotices): that time is not this
      // request's, up to kGateWaitLimitMs in all.
      const double ms = reply.body.contains("ms") && reply.body["ms"].is_number() ? reply.body["ms"].get<double>() : 0;
      const double move = std::clamp(ms, 0.0, kGateWaitLimitMs - moved_ms);
      moved_ms += move;
      deadline = ipc::Deadline::after_ms(deadline.remaining_ms() + move);
    }
  } catch (const ipc::WireError& e) {
    if (e.kind() == ipc::WireError::Kind::kTimeout) {
      fail("judge did not answer in time; killed", /*timed_out=*/true);
    }
    fail(std::string("lost the judge: ") + e.what());
  }
}

void JudgeConnection::fail(const std::string& what, bool timed_out) {
  {
    std::lock_guard<std::mutex> lock(control_mutex_);
    control_.reset();
  }
  std::string status;
  if (child_.running()) {
    // A closed channel means it is dying; give it a moment to tell us how.
    auto s = child_.wait_for(200);
    status = ipc::describe_exit_status(s ? *s : child_.kill_and_reap());
  }
  throw JudgeFailure(what + (status.empty() ? "" : " (judge exit: " + status + ")"), timed_out);
}

void JudgeConnection::stop() {
  {
    std::lock_guard<std::mutex> lock(control_mutex_);
    if (control_ && child_.running()) {
      try {
        ipc::send_frame(control_.get(), {{"type", "shutdown"}}, ipc::Deadline::after_ms(100));
      } catch (const ipc::WireError&) {
        // Already gone; reaped below.
      }
    }
    control_.reset();
  }
  if (child_.running() && !child_.wait_for(kShutdownGraceMs)) child_.kill_and_reap();
  child_.kill_and_reap();
}

void JudgeConnection::interrupt() {
  std::lock_guard<std::mutex> lock(control_mutex_);
  if (control_) ::shutdown(control_.get(), SHUT_RDWR);
}

}  // namespace kforge::exec
