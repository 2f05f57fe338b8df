#include "kforge/env/executor.h"

#include "kforge/core/error.h"
#include "kforge/env/device_pool.h"

namespace kforge::env {

const std::string& backend_name(BackendKind kind) {
  static const std::string kCpu = "cpu", kCuda = "cuda";
  return kind == BackendKind::kCuda ? kCuda : kCpu;
}

BackendKind parse_backend(const std::string& name) {
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "cuda") return BackendKind::kCuda;
  throw InputError("unknown backend '" + name + "' (expected cpu or cuda)");
}

std::unique_ptr<Executor> make_executor(const ExecutorConfig& config) { return make_device_pool(config); }

}  // namespace kforge::env
