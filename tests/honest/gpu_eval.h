// What both GPU corpus tests do with a candidate: compile it with nvcc and
// evaluate it exactly as a submit step is (verify and time; the profile stage
// only where env::runs_profile says a submit has it, which by default it does
// not: the exploits must be caught by the checks every submit runs) through
// one shared cuda-backend Executor. Header-only so the CPU-label tests do not link the
// Executor.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "corpus.h"
#include "kforge/env/executor.h"

namespace kforge::corpus {

inline env::Executor& gpu_executor() {
  static std::unique_ptr<env::Executor> e = [] {
    env::ExecutorConfig config;
    config.backend = env::BackendKind::kCuda;
    return env::make_executor(config);
  }();
  return *e;
}

// Fails the calling test (and returns false) when the candidate does not compile.
inline bool evaluate_as_submit(const std::filesystem::path& file, const std::filesystem::path& task_file,
                               env::EvalReport* report) {
  env::EvalRequest request;
  request.task = load_task(task_file);
  const env::CompileResult compiled = compile_cuda(file, request.task);
  EXPECT_TRUE(compiled.ok) << file << "\n" << compiled.diagnostics << compiled.system_error;
  if (!compiled.ok) return false;
  request.artifact = compiled.artifact;
  request.verify = true;
  request.time = true;
  request.options = gpu_options();
  request.profile = env::runs_profile(ActionType::kSubmit, request.options);
  *report = gpu_executor().submit(request).get();
  return true;
}

}  // namespace kforge::corpus
