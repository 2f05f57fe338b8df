// The judge's handle on one runner process: spawning it with its scratch dir
// and output file, the request/reply exchanges of runner_protocol.h under
// deadlines, and turning every way a runner can fail into a RunnerReply
// instead of an exception. A runner that failed is killed, reaped and its
// scratch dir removed before the reply is returned. Backend-neutral: the arena
// descriptor and the descriptors passed with `setup` come from the backend.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ipc/child_process.h"
#include "ipc/deadline.h"
#include "kforge/core/unique_fd.h"

namespace kforge::judge {

using json = nlohmann::json;

struct RunnerLimits {
  // The candidate's own allocation budget: RLIMIT_AS is set to the runner's
  // address space after loading and mapping the arena plus this.
  uint64_t memory_bytes = 4ull << 30;
  double cpu_seconds = 130;          // RLIMIT_CPU backstop; deadlines act long before
  uint64_t output_bytes = 1u << 20;  // RLIMIT_FSIZE: bounds the candidate's stdout/stderr file
  int open_files = 16;               // RLIMIT_NOFILE
  // The device memory the candidate's own allocations may reach in this
  // runner (CUDA: judge/lane_memory_budget.h, runner/device_allowance.h);
  // 0: no budget.
  uint64_t device_memory_bytes = 0;
};

// What a runner loads: a shared object exporting kf_forward (modes cpp and
// cuda), or an NVRTC CUBIN with its launch plan (mode nvrtc), which the
// runner launches itself. `cubin` set means the latter.
struct RunnerCandidate {
  std::filesystem::path library;
  std::filesystem::path cubin;
  // nvrtc: the normalized plan (Artifact::launch), with each kernel's lowered name.
  json launch;
  // nvrtc: the names the plan refers to, in the order the tensors are bound:
  // the task's inputs, params, then outputs (launch_tensor_names()).
  std::vector<std::string> tensor_names;

  static RunnerCandidate shared_object(std::filesystem::path library);
  static RunnerCandidate nvrtc(std::filesystem::path cubin, json launch, std::vector<std::string> tensor_names);
};

// The `setup` request for `candidate` (without its seq): {"type": "setup",
// "limits", "arena"} plus {"library"} or {"cubin", "launch", "tensors"}.
json setup_request(const RunnerCandidate& candidate, const RunnerLimits& limits, const json& arena);

struct RunnerReply {
  enum class Status {
    kOk,        // `body` holds the reply
    kError,     // the runner reported a failure it survived (dlopen error, an exception
                // escaping kf_forward); `detail` is its message, body["stage"] where
    kCrashed,   // the runner died; `detail` is "SIGSEGV", "exit code 3", ...
    kTimedOut,  // no reply before the deadline; the runner was killed
    kSandbox,   // a blocked system call; `syscall` names it
    kProtocol,  // a reply that is not the one expected (forged, garbled, out of order)
  };
  Status status = Status::kOk;
  // kOk: the reply, its fields checked against what its type may carry
  // (reply_problem()); strings made valid UTF-8. Read it with the typed
  // accessors of json_fields.h.
  json body;
  // Whether the candidate's code may have run in this runner by the end of
  // this exchange: set once the runner said `loading` during `setup`. A
  // failure before that (the spare did not start, the arena could not be
  // mapped, the sandbox could not be set up) is the harness's, never the
  // candidate's (docs/threat-model.md, "Who is to blame").
  bool candidate_ran = false;
  double round_trip_ms = 0;
  // CPU time the kernel accounted to the runner during the exchange (read by
  // us from its CPU clock, so the candidate cannot falsify it); < 0 if unknown.
  double cpu_ms = -1;
  std::string detail;
  std::string syscall;
  bool ok() const { return status == Status::kOk; }
};

class RunnerProcess {
 public:
  struct Config {
    std::filesystem::path executable;    // kforge-runner
    std::filesystem::path scratch_root;  // a sub-directory per runner is created here
    std::string backend = "cpu";
    int device = 0;         // GPU index (cuda)
    bool profiler = false;  // cuda: a runner with CUPTI set up, for `profile` requests
    // How long the judge busy-waits for each reply before sleeping (wire.h,
    // recv_frame); 0 = sleep at once. The cuda backend spins: its round trips
    // bound the GPU clock (judge/timing_tamper.h), so they must not carry the
    // judge's own wake-up.
    int reply_spin_us = 0;
    // cuda: the context's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, set
    // by the runner before its context exists); 0: the driver's default.
    int cuda_connections = 0;
    // cuda: a timing runner that also sets up CUPTI's activity tracing, so
    // that a profile after its timing can trace the candidate in it
    // (profile.h; $KFORGE_TRACE_IN_TIMING_RUNNER).
    bool tracer = false;
  };

  // Starts a runner that waits for `setup`. Throws SystemError if it cannot.
  // The runner starts up on its own (on GPUs: the CUDA context, warm-ups,
  // CUPTI) and says `started` when done; the first exchange waits for that.
  static std::unique_ptr<RunnerProcess> spawn(const Config& config);
  ~RunnerProcess();
  RunnerProcess(const RunnerProcess&) = delete;
  RunnerProcess& operator=(const RunnerProcess&) = delete;

  RunnerReply setup(const RunnerCandidate& candidate, const RunnerLimits& limits, const json& arena,
                    const std::vector<int>& fds, ipc::Deadline deadline);
  // A shared object exporting kf_forward.
  RunnerReply setup(const std::filesystem::path& library, const RunnerLimits& limits, const json& arena,
                    const std::vector<int>& fds, ipc::Deadline deadline) {
    return setup(RunnerCandidate::shared_object(library), limits, arena, fds, deadline);
  }
  RunnerReply bind(const json& inputs, const json& outputs, ipc::Deadline deadline);
  // On kOk, body has "rc" and "self_ns" (the runner's own measurement), and
  // on devices that time on the device "device_ns" and "drain_ns".
  // `options` are merged into the request ({"graph": true}, {"repeat": n}).
  RunnerReply call(bool null_call, ipc::Deadline deadline, const json& options = json::object());
  // Profiler runners: kernel attribution and hardware metrics of kf_forward
  // on the bound tensors; tracing timing runners: the attribution only. On
  // kOk, body["profile"].
  RunnerReply profile(const json& request, ipc::Deadline deadline);
  // Started with Config::tracer: a `profile` request can trace in it.
  bool traces() const { return tracer_; }

  // Waits for the runner's `started` (runner_protocol.h) if it has not come
  // yet. A runner that does not start by the deadline is killed (kTimedOut).
  RunnerReply await_started(ipc::Deadline deadline);
  bool started() const { return started_; }
  // The control socket, for poll(2) while waiting for `started` among other
  // things (RunnerPool::collect_started); never read or written through it.
  int control_fd() const { return control_.get(); }

  // Kills (SIGKILL), reaps and removes the scratch dir, keeping the output
  // tail. Idempotent.
  void terminate();
  bool alive() const { return child_.running() && control_.valid(); }
  // Like alive(), but first reaps the process if it exited on its own (a
  // spare that died while waiting).
  bool check_alive();
  pid_t pid() const { return child_.pid(); }
  const std::filesystem::path& scratch_dir() const { return scratch_; }
  // The last `max_bytes` of the candidate's stdout/stderr.
  std::string output_tail(size_t max_bytes = 4096) const;

 private:
  RunnerProcess() = default;
  RunnerReply exchange(json request, const std::string& expected_type, ipc::Deadline deadline,
                       const std::vector<int>& fds = {});
  // Sends `request` (if any) and reads the reply of `expected_type` numbered
  // `seq` (0: unnumbered), turning every failure into a reply.
  RunnerReply converse(const json* request, const std::vector<int>& fds, const std::string& expected_type, uint64_t seq,
                       ipc::Deadline deadline);
  RunnerReply fail(RunnerReply reply);
  std::string read_output_tail(size_t max_bytes) const;

  double runner_cpu_ms() const;

  ipc::ChildProcess child_;
  UniqueFd control_;
  std::filesystem::path executable_;  // for messages naming the runner
  clockid_t cpu_clock_ = 0;
  bool has_cpu_clock_ = false;
  std::filesystem::path scratch_;
  uint64_t seq_ = 0;
  int reply_spin_us_ = 0;
  bool tracer_ = false;
  std::string final_output_;
  bool terminated_ = false;
  bool started_ = false;
  bool candidate_ran_ = false;
};

const char* runner_status_name(RunnerReply::Status status);

// Largest payload of a reply other than `profiled`: honest ones are well
// under a kilobyte, and what a reply carries ends up in reports.
inline constexpr size_t kMaxReplyBytes = 64u << 10;
// An `error` reply's message is cut here for RunnerReply::detail.
inline constexpr size_t kMaxErrorMessageBytes = 2048;

// "" when `body`, a reply of `type`, carries only fields of the types the
// judge reads (`done`: integer rc, non-negative self_ns, ...), else what is
// wrong, naming the field. Unknown types are the caller's business.
std::string reply_problem(const std::string& type, const json& body);

// "openat" for a system call number of this architecture, or "syscall N".
std::string syscall_name(int number);

}  // namespace kforge::judge
