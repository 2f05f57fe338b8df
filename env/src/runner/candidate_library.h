// The candidate's shared object, loaded with dlopen and never unloaded (the
// runner exits after one candidate). Loading runs its static constructors,
// which is why it happens inside the sandbox's loading phase.
#pragma once

#include <string>

#include "kforge/kernel_abi.h"

namespace kforge::runner {

using KfForward = int (*)(const kf_tensor*, int, kf_tensor*, int, void*);

struct CandidateLibrary {
  KfForward forward = nullptr;
  std::string error;  // dlopen/dlsym message when forward is null
};

CandidateLibrary load_candidate(const std::string& path);

}  // namespace kforge::runner
