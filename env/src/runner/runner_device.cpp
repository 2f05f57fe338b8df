#include "runner/runner_device.h"

#include <algorithm>

namespace kforge::runner {

CallResult RunnerDevice::run_call(const std::function<int()>* forward, const nlohmann::json& options) {
  CallResult result;
  if (forward != nullptr) {
    const int repeat = std::max(1, options.value("repeat", 1));
    for (int i = 0; i < repeat && result.rc == 0; ++i) result.rc = (*forward)();
  }
  synchronize();
  return result;
}

std::unique_ptr<CubinKernels> RunnerDevice::load_cubin(const std::string&, const std::vector<std::string>&) {
  throw std::runtime_error("a CUBIN (solution mode nvrtc) runs on the cuda backend only");
}

nlohmann::json RunnerDevice::profile(const std::function<int()>&, const nlohmann::json&) {
  throw std::runtime_error("this runner has no profiler (profiling needs the CUDA backend)");
}

std::unique_ptr<RunnerDevice> make_runner_device(const std::string& backend, const RunnerDeviceOptions& options) {
  if (backend == "cpu") return make_cpu_runner_device();
  if (backend == "cuda") {
#if KFORGE_HAVE_CUDA
    return make_cuda_runner_device(options);
#else
    throw std::runtime_error(
        "CUDA backend not built into kforge-runner (the CUDA toolkit was not found at build time)");
#endif
  }
  throw std::runtime_error("unknown backend '" + backend + "'");
}

}  // namespace kforge::runner
