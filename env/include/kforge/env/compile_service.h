// Content-hash compile cache plus a bounded compile pool (DESIGN.md §4).
//
// submit() returns at once; compiles run on worker threads so they overlap
// with GPU work of other episodes. Each mode has its own concurrency limit
// (NVRTC runs in-process, nvcc and the host compiler as subprocesses). Results
// are cached in memory and on disk under cache_dir/<hash>/, keyed by
// sha256(source, mode, options, compiler identity); concurrent requests for
// the same hash share one compile.
#pragma once

#include <filesystem>
#include <future>
#include <map>
#include <memory>

#include "kforge/env/compiler.h"

namespace kforge::env {

struct CompileServiceConfig {
  std::filesystem::path cache_dir;  // default: $KFORGE_CACHE_DIR or ~/.cache/kforge/compile
  int threads = 4;                  // worker threads in total
  std::map<SolutionMode, int> per_mode_limit = {
      {SolutionMode::kCpp, 2}, {SolutionMode::kCuda, 4}, {SolutionMode::kNvrtc, 4}, {SolutionMode::kTorchExt, 2}};
};

class CompileService {
 public:
  explicit CompileService(CompileServiceConfig config);
  ~CompileService();
  CompileService(const CompileService&) = delete;
  CompileService& operator=(const CompileService&) = delete;

  void add_compiler(std::unique_ptr<Compiler> compiler);
  bool supports(SolutionMode mode) const;
  std::future<CompileResult> submit(const Solution& solution, const CompileContext& ctx);
  // The key a solution would be cached under (for tests and replay).
  std::string cache_key(const Solution& solution, const CompileContext& ctx) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The compilers available on this build for a backend: {cpp} for CPU,
// {cuda, nvrtc, torch_ext} for CUDA when the toolkit was found.
void add_default_compilers(CompileService& service, const std::string& backend);

}  // namespace kforge::env
