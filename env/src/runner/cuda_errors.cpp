#include "runner/cuda_errors.h"

#include <stdexcept>

namespace kforge::runner {

std::string error_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")"; }

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error(what + ": " + error_text(e));
}

// Errors that leave the context unusable: the candidate's kernel faulted.
bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorTensorMemoryLeak:
      return true;
    default:
      return false;
  }
}

// The text the judge puts after "runtime error: ".
std::string fault_text(cudaError_t e, int rc) {
  std::string s = is_sticky(e) ? "CUDA fault " + error_text(e) : "CUDA error " + error_text(e);
  if (rc != 0) s = "kf_forward returned " + std::to_string(rc) + " with " + s;
  return s;
}

}  // namespace kforge::runner
