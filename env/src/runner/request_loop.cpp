#include "runner/request_loop.h"

#include <time.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "ipc/runner_protocol.h"
#include "ipc/wire.h"
#include "runner/candidate_library.h"
#include "runner/plan_candidate.h"

namespace kforge::runner {
namespace {

using ipc::Deadline;
using ipc::Frame;
using ipc::json;
namespace protocol = ipc::runner_protocol;

uint64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Blocking send without a deadline: a deadline needs poll(2), which the
// running filter does not allow. A judge that stops reading kills us on its
// own deadline anyway.
void reply(const json& body) { ipc::send_frame(protocol::kControlFd, body, Deadline::never()); }

void reply_error(uint64_t seq, const std::string& stage, const std::string& message) {
  reply({{"type", "error"}, {"seq", seq}, {"stage", stage}, {"message", message}});
}

// Builds the kf_tensor array for one side of a call, validating that every
// tensor lies inside the arena.
std::vector<kf_tensor> parse_tensors(const json& list, const RunnerDevice& device) {
  std::vector<kf_tensor> out;
  for (const auto& t : list) {
    kf_tensor k{};
    auto offset = t.at("offset").get<uint64_t>();
    auto nbytes = t.at("nbytes").get<uint64_t>();
    if (offset > device.arena_bytes() || nbytes > device.arena_bytes() - offset) {
      throw std::runtime_error("tensor outside the arena");
    }
    k.data = device.arena_address(offset);
    k.dtype = t.at("dtype").get<int32_t>();
    const auto& shape = t.at("shape");
    const auto& stride = t.at("stride");
    if (shape.size() > KF_MAX_DIMS || stride.size() != shape.size()) throw std::runtime_error("bad tensor rank");
    k.ndim = static_cast<int32_t>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) {
      k.shape[i] = shape[i].get<int64_t>();
      k.stride[i] = stride[i].get<int64_t>();
    }
    out.push_back(k);
  }
  return out;
}

SandboxLimits parse_limits(const json& j) {
  SandboxLimits l;
  l.memory_bytes = j.at("memory_bytes").get<uint64_t>();
  l.cpu_seconds = j.at("cpu_seconds").get<double>();
  l.output_bytes = j.at("output_bytes").get<uint64_t>();
  l.open_files = j.at("open_files").get<int>();
  return l;
}

// What the loop keeps between requests: the device, the sandbox's phase, and
// the candidate once it is loaded (and only after the running filter is on).
struct Session {
  RunnerDevice* device;
  SandboxState sandbox;
  std::unique_ptr<Candidate> candidate;
  // Made once: a std::function holding a single reference stays in its
  // small-object buffer, so calls allocate nothing on the way to forward().
  std::function<int()> forward;
};

void handle_call(Session& s, const json& msg, uint64_t seq) {
  if (s.candidate == nullptr) return reply_error(seq, "call", "no candidate loaded");
  bool null_call = msg.value("null", false);
  CallResult result;
  uint64_t start = now_ns();
  // The ABI is C, but a C++ candidate can still let an exception escape
  // (std::bad_alloc at the memory limit): a failure of the call, not of
  // the runner. Device failures (a CUDA fault) come as DeviceError.
  try {
    result = s.device->run_call(null_call ? nullptr : &s.forward, msg);
  } catch (const DeviceError& e) {
    return reply_error(seq, "kf_forward", e.what());
  } catch (const std::exception& e) {
    return reply_error(seq, "kf_forward", std::string("kf_forward threw ") + e.what());
  } catch (...) {
    return reply_error(seq, "kf_forward", "kf_forward threw an exception that is not a std::exception");
  }
  uint64_t elapsed = now_ns() - start;
  // A launch of an nvrtc kernel that the runtime refused: the runner
  // knows why, and a bare status would hide it.
  if (result.rc != 0 && !s.candidate->error().empty()) return reply_error(seq, "kf_forward", s.candidate->error());
  json done = result.extra;
  done["type"] = "done";
  done["seq"] = seq;
  done["rc"] = result.rc;
  done["self_ns"] = elapsed;
  reply(done);
}

void handle_profile(Session& s, const json& msg, uint64_t seq) {
  if (s.candidate == nullptr) return reply_error(seq, "profile", "no candidate loaded");
  json profile;
  try {
    profile = s.device->profile(s.forward, msg);
  } catch (const std::exception& e) {
    return reply_error(seq, "profile", e.what());
  } catch (...) {
    return reply_error(seq, "profile", "kf_forward threw an exception that is not a std::exception");
  }
  reply({{"type", "profiled"}, {"seq", seq}, {"profile", profile}});
}

void handle_bind(Session& s, const json& msg, uint64_t seq) {
  std::vector<kf_tensor> inputs = parse_tensors(msg.at("inputs"), *s.device);
  std::vector<kf_tensor> outputs = parse_tensors(msg.at("outputs"), *s.device);
  s.device->on_bind();
  // nvrtc: the launch plan is evaluated here; a plan that fails for
  // these shapes is this request's error, naming the kernel and field.
  if (s.candidate != nullptr) s.candidate->bind(std::move(inputs), std::move(outputs));
  reply({{"type", "bound"}, {"seq", seq}});
}

// Milliseconds of each part of the set-up, for the judge's report
// (phase_ms.spawn_<part>): where a candidate's load time goes.
class SetupPhases {
 public:
  void mark(const char* part) {
    const uint64_t now = now_ns();
    phases_[part] = static_cast<double>(now - last_) / 1e6;
    last_ = now;
  }
  const json& phases() const { return phases_; }

 private:
  uint64_t last_ = now_ns();
  json phases_ = json::object();
};

// A shared object runs its static constructors here; a CUBIN is read
// (read-only opens are still allowed) and loaded onto the device.
std::unique_ptr<Candidate> load_candidate(RunnerDevice* device, const json& msg, SetupPhases* phases) {
  std::unique_ptr<Candidate> loaded;
  if (msg.contains("cubin")) {
    loaded = load_plan_candidate(msg, [device](const std::string& image, const std::vector<std::string>& names) {
      return device->load_cubin(image, names);
    });
  } else {
    loaded = load_library_candidate(msg.at("library").get<std::string>(), device);
  }
  phases->mark("load");
  device->after_load();
  phases->mark("after_load");
  return loaded;
}

// The arena, the loading filter, the candidate's code, then the running
// filter: in this order, and the candidate is callable only after the last.
void handle_setup(Session& s, Frame& frame, uint64_t seq) {
  const json& msg = frame.body;
  if (s.candidate != nullptr) return reply_error(seq, "setup", "already set up");
  SetupPhases phases;
  SandboxLimits limits = parse_limits(msg.at("limits"));
  limits.open_files += s.device->extra_open_files();
  s.device->set_device_memory_limit(msg.at("limits").value("device_memory_bytes", uint64_t{0}));
  // The arena first: mapping it is harness work (CUDA: opening an IPC
  // handle), done before any candidate code exists in the process.
  s.device->map_arena(msg.at("arena"), &frame.fds);
  phases.mark("arena");
  enter_loading_phase(limits, s.device->extra_syscalls(), s.device->writable_files(), &s.sandbox,
                      s.device->device_ioctl_files());
  phases.mark("loading_filter");
  // From here on the candidate's code may run (static constructors,
  // the driver parsing its CUBIN): the judge blames what follows on
  // the candidate, and what came before on the harness.
  reply({{"type", "loading"}, {"seq", seq}});
  std::unique_ptr<Candidate> loaded;
  try {
    loaded = load_candidate(s.device, msg, &phases);
  } catch (const std::exception& e) {
    return reply_error(seq, "load", e.what());
  }
  enter_running_phase(limits, &s.sandbox);
  phases.mark("running_filter");
  // Only now: nothing may call the candidate before the running filter.
  s.candidate = std::move(loaded);
  reply({{"type", "ready"}, {"seq", seq}, {"sandbox", s.sandbox.to_json()}, {"phase_ms", phases.phases()}});
}

}  // namespace

int serve_requests(RunnerDevice* device, SandboxState sandbox) {
  Session s{device, std::move(sandbox), nullptr, {}};
  s.forward = [&s] { return s.candidate->forward(); };
  while (true) {
    Frame frame;
    try {
      frame = ipc::recv_frame(protocol::kControlFd, Deadline::never(), device->request_spin_us());
    } catch (const ipc::WireError&) {
      return 0;  // the judge went away: nothing left to do
    }
    const json& msg = frame.body;
    std::string type = msg.value("type", "");
    uint64_t seq = msg.value("seq", uint64_t{0});
    try {
      if (type == "call") {
        handle_call(s, msg, seq);
      } else if (type == "profile") {
        handle_profile(s, msg, seq);
      } else if (type == "bind") {
        handle_bind(s, msg, seq);
      } else if (type == "setup") {
        handle_setup(s, frame, seq);
      } else {
        reply_error(seq, "protocol", "unknown message type '" + type + "'");
      }
    } catch (const ipc::WireError&) {
      return 0;
    } catch (const std::exception& e) {
      reply_error(seq, type, e.what());
    }
  }
}

}  // namespace kforge::runner
