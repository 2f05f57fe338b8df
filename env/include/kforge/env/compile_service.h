// Content-hash compile cache plus a bounded compile pool (docs/architecture.md#solutions).
//
// submit() returns at once; compiles run on worker threads so they overlap
// with GPU work of other episodes. Each mode has its own concurrency limit
// (NVRTC runs in-process, nvcc and the host compiler as subprocesses). Results
// are cached in memory and on disk under cache_dir/<hash>/, keyed by
// sha256(source, mode, options, compiler identity); concurrent requests for
// the same hash share one compile. Details (layout of the cache directory,
// what is and is not cached, atomicity): docs/compile.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <string>

#include "kforge/env/compiler.h"

namespace kforge::env {

struct CompileServiceConfig {
  // Default (empty): default_compile_cache_dir().
  std::filesystem::path cache_dir;
  // Worker threads in total; 0: one per core this process may run on. A GPU
  // judges a candidate in ~0.2 s while nvcc takes ~1.7 core-seconds for
  // one (torch_ext ~2.3, NVRTC ~0.05), so keeping one GPU busy with cuda or
  // torch_ext candidates takes about ten cores (docs/compile.md, "Pool").
  int threads = 0;
  // Concurrent compiles of one mode; a mode not listed may use every thread.
  std::map<SolutionMode, int> per_mode_limit;
  // Results kept in memory (least recently used are dropped; disk keeps all).
  size_t memory_cache_entries = 4096;
};

// Counters since the service started, for monitoring and tests.
struct CompileStats {
  uint64_t submitted = 0;
  uint64_t compiled = 0;  // compiler runs
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t shared = 0;         // joined an identical compile already queued or running
  uint64_t rejected = 0;       // refused before compiling (flags, launch plan, size)
  uint64_t system_errors = 0;  // not cached: compiler missing, timeout, I/O, ...
};

// $KFORGE_CACHE_DIR, else $XDG_CACHE_HOME/kforge/compile, else
// ~/.cache/kforge/compile.
std::filesystem::path default_compile_cache_dir();

class CompileService {
 public:
  explicit CompileService(CompileServiceConfig config);
  ~CompileService();
  CompileService(const CompileService&) = delete;
  CompileService& operator=(const CompileService&) = delete;

  // Replaces the compiler of the same mode, if any.
  void add_compiler(std::unique_ptr<Compiler> compiler);
  bool supports(SolutionMode mode) const;
  // Never throws and the future never holds an exception: failures of the
  // system are results with `system_error` set. Pending requests still
  // queued when the service is destroyed get such a result; running compiles
  // are waited for.
  std::future<CompileResult> submit(const Solution& solution, const CompileContext& ctx);
  // The key a solution would be cached under (for tests and replay). Throws
  // SystemError when no compiler serves the mode or the compiler cannot run.
  std::string cache_key(const Solution& solution, const CompileContext& ctx) const;
  CompileStats stats() const;
  const std::filesystem::path& cache_dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The compilers available on this build for a backend: {cpp} for "cpu",
// {cuda, nvrtc, torch_ext} for "cuda". InputError for another backend name,
// SystemError for "cuda" in a build without the CUDA toolkit.
void add_default_compilers(CompileService& service, const std::string& backend);

}  // namespace kforge::env
