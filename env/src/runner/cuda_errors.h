// CUDA runtime errors as the runner reports them: the text of an error, the
// throwing check of the runner's own calls, and which errors are the
// candidate's faults.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace kforge::runner {

// "cudaErrorIllegalAddress (an illegal memory access was encountered)".
std::string error_text(cudaError_t e);
// Throws std::runtime_error "<what>: <error_text>" unless `e` is cudaSuccess.
void check(cudaError_t e, const std::string& what);
// Errors that leave the context unusable: the candidate's kernel faulted.
bool is_sticky(cudaError_t e);
// The text the judge puts after "runtime error: ".
std::string fault_text(cudaError_t e, int rc);

}  // namespace kforge::runner
