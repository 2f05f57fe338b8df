// The runner's side of runner_protocol.h: wait for `setup`, load and confine,
// then answer `bind` and `call` until the judge kills us.
#pragma once

#include <string>

#include "runner/runner_device.h"
#include "runner/sandbox.h"

namespace kforge::runner {

// Returns the process exit code (the judge normally SIGKILLs us first).
int serve_requests(RunnerDevice* device, SandboxState sandbox);

}  // namespace kforge::runner
