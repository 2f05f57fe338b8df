// Turning a Solution into something a runner can load (DESIGN.md §4).
//
// Each solution mode has one Compiler. Compilers never load candidate code;
// they only produce files. CompileService (compile_service.h) adds the content
// hash cache and the bounded thread pool on top.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/solution.h"
#include "kforge/core/task_spec.h"

namespace kforge::env {

// A compiled solution, addressed by the hash of everything that went into it.
struct Artifact {
  std::string hash;  // sha256 hex of (source, mode, options, compiler identity)
  SolutionMode mode = SolutionMode::kCpp;
  std::filesystem::path path;  // .so for cpp/cuda/torch_ext, .cubin for nvrtc
  // nvrtc: the launch plan, validated and normalized (see cuda/launch_plan.h).
  json launch = nullptr;
  // Per-kernel resource usage where the compiler reports it (ptxas -v):
  // {"<kernel>": {"registers": 32, "shared_bytes": 0, "spill_bytes": 0, ...}}.
  json resources = json::object();
  // Libraries the task allows the candidate to link (from TaskSpec::libraries).
  std::vector<std::string> libraries;
};

struct CompileResult {
  bool ok = false;
  // Refused before any compiler ran (a flag outside the allow-list, a source
  // that is too large, ...). `diagnostics` says why.
  bool rejected = false;
  Artifact artifact;
  // Condensed for the policy: the first errors with line numbers of the
  // candidate's own source, without compiler noise.
  std::string diagnostics;
  std::string log;  // full compiler output
  double compile_ms = 0.0;
  bool cache_hit = false;
};

// Everything that decides the output of a compile besides the solution:
// target architecture, the include dir with kforge/kernel_abi.h, limits.
struct CompileContext {
  std::string arch = "sm_90a";           // CUDA modes
  std::filesystem::path abi_include_dir;  // contains kforge/kernel_abi.h
  double timeout_s = 120.0;
  size_t max_source_bytes = 1 << 20;
  std::vector<std::string> libraries;     // allowed libraries (task config)
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  virtual SolutionMode mode() const = 0;
  // Part of the cache key: compiler path and version, fixed flags, arch.
  virtual std::string identity(const CompileContext& ctx) const = 0;
  // Builds into `out_dir` (an empty directory owned by this call). Candidate
  // errors are results (ok = false), never exceptions; SystemError only when
  // the compiler itself cannot run.
  virtual CompileResult compile(const Solution& solution, const CompileContext& ctx,
                                const std::filesystem::path& out_dir) = 0;
};

}  // namespace kforge::env
