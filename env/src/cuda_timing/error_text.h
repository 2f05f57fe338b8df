// How cuda_timing's pieces say why they are unavailable.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace kforge::cuda_timing {

// "<what>: <error name> (<error string>)".
inline std::string error_text(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

}  // namespace kforge::cuda_timing
