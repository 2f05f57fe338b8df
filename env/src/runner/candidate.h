// The candidate as the request loop sees it, whatever its solution mode
// (docs/architecture.md#solutions): tensors are bound once per shape case, and forward() is one
// call on the device's stream. Two kinds, loaded during the sandbox's loading
// phase and never unloaded (the runner exits after one candidate):
//  - cpp, cuda: a shared object exporting kf_forward (candidate_library.h);
//  - nvrtc: a CUBIN on the device plus its launch plan, evaluated for the
//    bound shapes, whose kernels forward() launches itself (plan_candidate.h).
// Both go through the same call, timing, graph and profile code, which only
// ever sees forward().
#pragma once

#include <string>
#include <vector>

#include "kforge/kernel_abi.h"

namespace kforge::runner {

class Candidate {
 public:
  virtual ~Candidate() = default;
  // The tensors of a shape case: the task's inputs then params, and the
  // outputs, already checked to lie inside the arena. Throws
  // std::runtime_error when the candidate cannot run on them (nvrtc: the
  // launch plan fails for these shapes); it is then left unbound.
  virtual void bind(std::vector<kf_tensor> inputs, std::vector<kf_tensor> outputs) = 0;
  // One call; 0 means success. Runs inside timed calls, so it must not
  // allocate on success.
  virtual int forward() = 0;
  // Why the last forward() failed, when the runner itself knows (an nvrtc
  // launch the runtime refused); empty when a nonzero status is the
  // candidate's own (kf_forward's return value).
  const std::string& error() const { return error_; }

 protected:
  std::string error_;
};

}  // namespace kforge::runner
