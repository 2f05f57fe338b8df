#include "judge/judge_device.h"

#include <stdexcept>

#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif

#include "judge/cpu_judge_device.h"
#include "judge/cuda_judge_device.h"

namespace kforge::judge {

void JudgeDevice::copy_into(at::Tensor& arena_view, const at::Tensor& source) { arena_view.copy_(source); }

void JudgeDevice::poison(at::Tensor& arena_view) {
  if (at::isFloatingType(arena_view.scalar_type())) {
    arena_view.fill_(std::numeric_limits<double>::quiet_NaN());
  } else {
    arena_view.reshape({-1}).view(at::kByte).fill_(0xA5);
  }
}

json JudgeDevice::versions() const {
#ifdef TORCH_VERSION
  return {{"torch", TORCH_VERSION}};
#else
  return {{"torch", "unknown"}};
#endif
}

std::string gpu_gate_key(const std::string& backend, int index) {
  if (backend != "cuda") return "";
#if KFORGE_HAVE_CUDA
  return cuda_gate_key(index);
#else
  return "cuda-" + std::to_string(index);
#endif
}

int judge_device_count(const std::string& backend) {
  if (backend == "cpu") return 1;
  if (backend == "cuda") {
#if KFORGE_HAVE_CUDA
    return cuda_device_count();
#else
    return 0;
#endif
  }
  return -1;
}

std::unique_ptr<JudgeDevice> make_judge_device(const std::string& backend, int index) {
  if (backend == "cpu") return make_cpu_judge_device();
  if (backend == "cuda") {
#if KFORGE_HAVE_CUDA
    return make_cuda_judge_device(index);
#else
    throw std::runtime_error("CUDA backend not built into kforge-judge (the CUDA toolkit was not found at build time)");
#endif
  }
  throw std::runtime_error("unknown backend '" + backend + "' (expected cpu or cuda)");
}

}  // namespace kforge::judge
