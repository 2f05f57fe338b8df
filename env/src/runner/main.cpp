// kforge-runner: loads one candidate shared object in a sandbox and calls its
// kf_forward on arena memory shared with the judge (docs/architecture.md#isolation). Started
// only by the judge; speaks runner_protocol.h on fd 3. Never links libtorch.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "ipc/build_identity.h"
#include "ipc/child_process.h"
#include "ipc/runner_protocol.h"
#include "ipc/wire.h"
#include "kforge/core/errno_text.h"
#include "runner/request_loop.h"
#include "runner/runner_device.h"
#include "runner/sandbox.h"

namespace {

int usage(const char* message) {
  std::fprintf(stderr,
               "kforge-runner: %s\nusage: kforge-runner --backend cpu|cuda --scratch DIR --parent-pid PID [--device N] "
               "[--profiler 0|1] [--tracer 0|1] [--cuda-connections 1..32]\n",
               message);
  return kforge::ipc::runner_protocol::kUsageExitCode;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "cpu", scratch;
  long parent = 0;
  std::optional<std::string> cuda_connections;
  kforge::runner::RunnerDeviceOptions device_options;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    if (key == "--backend") {
      backend = argv[i + 1];
    } else if (key == "--scratch") {
      scratch = argv[i + 1];
    } else if (key == "--parent-pid") {
      parent = std::strtol(argv[i + 1], nullptr, 10);
    } else if (key == "--device") {
      device_options.device = std::atoi(argv[i + 1]);
    } else if (key == "--profiler") {
      device_options.profiler = std::string(argv[i + 1]) == "1";
    } else if (key == "--tracer") {
      device_options.tracer = std::string(argv[i + 1]) == "1";
    } else if (key == "--cuda-connections") {
      cuda_connections = argv[i + 1];
    } else {
      return usage(("unknown argument " + key).c_str());
    }
  }
  if (scratch.empty() || parent <= 0) return usage("--scratch and --parent-pid are required");
  if (cuda_connections) {
    const int n = std::atoi(cuda_connections->c_str());
    if (n < 1 || n > 32 || std::to_string(n) != *cuda_connections) return usage("--cuda-connections takes 1 to 32");
    // Read by the driver when the context is created (below), before any
    // candidate code exists: fewer hardware queues, a shorter teardown
    // (ExecutorConfig::runner_cuda_connections). Still one thread here.
    ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", cuda_connections->c_str(), 1);
  }
  kforge::ipc::die_with_parent(static_cast<pid_t>(parent));
  kforge::ipc::close_descriptors_from(kforge::ipc::runner_protocol::kControlFd + 1);
  // A write to a judge that went away must fail, not kill us before we exit.
  ::signal(SIGPIPE, SIG_IGN);
  if (::chdir(scratch.c_str()) != 0) return usage(("cannot enter scratch dir: " + kforge::errno_text(errno)).c_str());

  kforge::runner::SandboxState sandbox;
  kforge::runner::isolate_network(&sandbox);
  std::unique_ptr<kforge::runner::RunnerDevice> device;
  try {
    // Device set-up (CUDA: context, stream, events; CUPTI in a profiler
    // runner) happens here, while the runner is a spare waiting for work and
    // before any filter exists: it creates threads and opens device files,
    // which the sandbox will not allow later.
    device = kforge::runner::make_runner_device(backend, device_options);
  } catch (const std::exception& e) {
    return usage(e.what());
  }
  // Tells the judge that start-up, and with it this process' GPU work outside
  // a request (context creation, warm-ups, CUPTI set-up), is over: the judge
  // times nothing while a runner is still starting (RunnerPool::settle).
  try {
    // With the protocol it speaks and the build it is (build_identity.h): a
    // judge of another build does not use it.
    namespace ipc = kforge::ipc;
    ipc::send_frame(ipc::runner_protocol::kControlFd,
                    {{"type", "started"},
                     {"protocol", ipc::announced_protocol_version(ipc::kRunnerProtocolVersion,
                                                                  ipc::kTestOnlyRunnerProtocolVariable)},
                     {"build", ipc::build_id()}},
                    ipc::Deadline::never());
  } catch (const kforge::ipc::WireError&) {
    return 0;  // the judge went away
  }
  return kforge::runner::serve_requests(device.get(), std::move(sandbox));
}
