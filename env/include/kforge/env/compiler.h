// Turning a Solution into something a runner can load (docs/architecture.md#solutions).
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
  // Per-kernel resource usage where the compiler reports it (ptxas -v), keyed
  // by the demangled kernel signature: {"void scale<float, 4>(float const*,
  // float*, long)": {"mangled": "_Z5scale...", "registers": 32, "barriers": 1,
  // "shared_bytes": 4096, "constant_bytes": 0, "stack_bytes": 0,
  // "spill_store_bytes": 0, "spill_load_bytes": 0}}. Empty for cpp.
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
  // Wall time of this request: the compile, or the cache lookup on a hit.
  double compile_ms = 0.0;
  // No compile ran for this request: served from the cache (memory or disk)
  // or by an identical compile that was already running.
  bool cache_hit = false;
  // Non-empty when the system, not the candidate, failed: compiler missing or
  // not startable, I/O error, service shut down. Such results are never
  // cached. `diagnostics` says the same for the policy.
  std::string system_error;
  // The compile ran past CompileContext::timeout_s or memory_limit_bytes and
  // was stopped, or the compiler crashed on the source. These are compile
  // errors, charged to the candidate like any other (a preprocessor bomb, a
  // template explosion; docs/threat-model.md, "Who is to blame"), with
  // `diagnostics` saying which limit ("compile exceeded 120 s"). Not cached:
  // how far a compile gets before a limit depends on the machine's load.
  bool timed_out = false;
  bool out_of_memory = false;
  bool compiler_crashed = false;
  bool limit_hit() const { return timed_out || out_of_memory || compiler_crashed; }
};

// Everything that decides the output of a compile besides the solution:
// target architecture, the include dir with kforge/kernel_abi.h, limits.
struct CompileContext {
  std::string arch = "sm_90a";  // CUDA modes
  // Contains kforge/kernel_abi.h. Empty: $KFORGE_ABI_INCLUDE_DIR, else the
  // directory staged by the build (see default_abi_include_dir()).
  std::filesystem::path abi_include_dir;
  // Limits of one compile, for every compiler: g++ and nvcc (and what they
  // start) run as child processes with this address-space limit and are
  // killed at the timeout; NVRTC runs in a kforge-nvrtc worker process with
  // the same limits (docs/compile.md). Not part of the cache key.
  double timeout_s = 120.0;
  uint64_t memory_limit_bytes = uint64_t{4} << 30;
  size_t max_source_bytes = 1 << 20;
  std::vector<std::string> libraries;  // allowed libraries (task config)
  // Tensors a launch plan may name (nvrtc): the task's inputs, params and
  // outputs, see launch_tensor_names(). Added for launch-plan validation.
  std::vector<std::string> tensor_names;
};

// `base` with what the task decides filled in: libraries and tensor names.
CompileContext compile_context_for(const TaskSpec& task, CompileContext base = {});

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
  // What can be refused without compiling (flags outside the allow-list, a
  // launch plan that does not parse or names unknown tensors): a non-empty
  // message for the policy means `rejected`. CompileService calls it before
  // looking at the cache, because the verdict may depend on the context
  // (e.g. the task's tensor names) rather than on the cache key alone;
  // compile() applies it too.
  virtual std::string precheck(const Solution& /*solution*/, const CompileContext& /*ctx*/) const { return {}; }
};

}  // namespace kforge::env
