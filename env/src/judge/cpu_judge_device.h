// The CPU backend of the judge: a memfd arena shared with the runner, a
// last-level-cache flush, steady-clock timing. Both the reference (libtorch,
// set to one thread at judge startup) and the candidate (no threads allowed)
// run single-threaded, so speedups compare like with like.
#pragma once

#include <memory>

#include "judge/judge_device.h"

namespace kforge::judge {

std::unique_ptr<JudgeDevice> make_cpu_judge_device();

}  // namespace kforge::judge
