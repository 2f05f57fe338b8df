// Running a compiler as a child process with a deadline and a memory limit.
//
// The child gets its own process group so that a timeout kills the whole
// tree (nvcc runs cicc, ptxas, fatbinary, g++, ld), and it is always reaped
// before run_process returns: no zombies, no orphans holding our pipes. The
// memory limit (RLIMIT_AS) is set in the child before exec, so it binds the
// compiler and everything it starts from its first instruction: a source
// that makes the compiler allocate without end (a preprocessor bomb) fails
// there instead of taking the machine's memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kforge::env {

struct ProcessOptions {
  std::filesystem::path cwd;  // empty: inherit
  double timeout_s = 120.0;
  // Variables set (or, with std::nullopt, removed) on top of our environment.
  std::map<std::string, std::optional<std::string>> env;
  size_t max_output_bytes = 8u << 20;  // stdout+stderr beyond this is dropped
  // Address-space limit of the child and its descendants (each process
  // gets this much); 0: none.
  uint64_t memory_limit_bytes = 0;
};

struct ProcessResult {
  int exit_code = -1;   // -1 when killed by a signal
  int term_signal = 0;  // the signal that ended it, 0 if it exited
  bool timed_out = false;
  std::string output;  // stdout and stderr, interleaved as written
  double wall_ms = 0.0;
  // The largest resident set of the child or of any descendant it waited
  // for (getrusage's ru_maxrss).
  uint64_t peak_rss_bytes = 0;

  bool ok() const { return exit_code == 0 && !timed_out; }
};

// argv[0] must be a path (no PATH search: callers resolve it once, so the
// compiler's identity names the binary that actually runs). Throws
// SystemError when the process cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// The first executable called `name` on $PATH, or an empty path.
std::filesystem::path find_on_path(const std::string& name);

}  // namespace kforge::env
