// Helpers for the GPU tests: CUDA candidates compiled by the production nvcc
// and NVRTC paths (CompileService, cached on disk under the build tree), the bundled
// example tasks, small tasks, and evaluation options sized for tests.
#pragma once

#include <string>

#include "kforge/core/task_spec.h"
#include "kforge/core/timing_summary.h"
#include "kforge/env/compiler.h"
#include "kforge/env/eval.h"

namespace kforge::testing {

// Compiles `source` (mode cuda) for `task`; fails the current test and throws
// if nvcc rejects it.
env::Artifact compile_cuda(const std::string& source, const TaskSpec& task);
// Compiles `source` (mode nvrtc) with the launch plan `launch` for `task`
// (the plan is checked against the task's tensor names); fails the current
// test and throws if NVRTC or the plan check rejects it.
env::Artifact compile_nvrtc(const std::string& source, const json& launch, const TaskSpec& task);

// Compiles `source` (mode torch_ext: a KernelBench load_inline .py, or the
// CUDA source alone) for `task`; fails the current test and throws if nvcc
// or the source preparation rejects it.
env::Artifact compile_torch_ext(const std::string& source, const TaskSpec& task);

// examples/<name>/task.json and examples/<name>/cuda/<file>.
TaskSpec example_task(const std::string& name);
std::string example_source(const std::string& name, const std::string& file);
std::vector<std::string> example_names();

// y = relu(x * w + b) over [rows, cols] with per-column w, b (float32).
TaskSpec affine_task(int64_t rows, int64_t cols);

// A task whose every tensor is within the static limits but whose inputs
// together (160 GiB) do not fit on the GPU.
TaskSpec task_larger_than_the_gpu();

// Short warm-up and sampling caps; every check on, on the production's 5
// seeds (sizes shrink in tests, checks do not).
env::EvalOptions gpu_quick_options();

// "" when the candidate was timed on the device clock, or when the judge's
// cross-check replaced that clock by its own round trip and said why
// (judge/timing_tamper.h); otherwise what is wrong. Which of the two happens
// depends on how busy the host was during the timing (an honest 13 us kernel
// read 94 us of round trip with five other GPU tests beside it), so a test
// may assert only this, never the clock itself.
std::string device_clock_problem(const TimingSummary& t);

}  // namespace kforge::testing
