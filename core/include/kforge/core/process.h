// Running a program as a child process: argv only, never through a shell, so
// an argument is passed as it is (a path with a space, a `;` or a `$(...)`
// is text, not a command). The one way the tree starts helper programs:
// compilers (env/src/compile), the CUDA binary utilities (env/src/analysis),
// the plot and data scripts (data_synth, replay, `kforge synth`). The judge
// and runner processes have their own launcher (env/src/ipc/child_process.h), since
// they need inherited sockets and a sandbox.
//
// What every run gets:
// - a deadline: past it the child's whole process group is killed with
//   SIGKILL (nvcc runs cicc, ptxas, fatbinary, g++, ld; all go);
// - its own process group, default signal dispositions and an empty signal
//   mask, whatever the embedding program did to its own;
// - stdin from /dev/null;
// - its output captured up to a bound (beyond it dropped, or the child
//   killed), or written to a file;
// - reaping before run_process returns: no zombies, no orphans holding our
//   pipes;
// - optionally an address-space limit (RLIMIT_AS) set in the child before
//   exec, so it binds the program and everything it starts from its first
//   instruction: a source that makes a compiler allocate without end fails
//   there instead of taking the machine's memory.
//
// fork, not posix_spawn: posix_spawn has no attribute for the memory limit,
// and setting it afterwards with prlimit would race with the child's own
// first fork. Between fork and exec the child makes async-signal-safe calls
// only, so starting processes from many threads at once is safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kforge {

struct ProcessOptions {
  std::filesystem::path cwd;  // empty: inherit ours
  // Seconds until the process group is killed; infinity: no deadline.
  double timeout_s = 120.0;
  // Variables set (or, with std::nullopt, removed) on top of our environment.
  std::map<std::string, std::optional<std::string>> env;
  // false: stderr joins stdout in ProcessResult::output, interleaved as
  // written. true: stderr goes to ProcessResult::error_output.
  bool separate_stderr = false;
  // The most bytes kept of each captured stream. Beyond it the rest is
  // dropped (and the child runs on), or with kill_on_overflow the process
  // group is killed at once. Either way output_truncated says so.
  size_t max_output_bytes = 8u << 20;
  bool kill_on_overflow = false;
  // Non-empty: stdout and stderr are written to this file (created or
  // truncated) instead of captured; output stays empty.
  std::filesystem::path output_file;
  // Address-space limit of the child and of each descendant; 0: none.
  uint64_t memory_limit_bytes = 0;
};

struct ProcessResult {
  int exit_code = -1;   // -1 when killed by a signal
  int term_signal = 0;  // the signal that ended it, 0 if it exited
  bool timed_out = false;
  // More than max_output_bytes came; with kill_on_overflow the child was
  // killed for it. Without, `output` ends with a line saying so.
  bool output_truncated = false;
  std::string output;        // stdout, and stderr unless separate_stderr
  std::string error_output;  // stderr when separate_stderr
  double wall_ms = 0.0;
  // The largest resident set of the child or of any descendant it waited
  // for (getrusage's ru_maxrss).
  uint64_t peak_rss_bytes = 0;

  bool ok() const { return exit_code == 0 && !timed_out; }
};

// argv[0] must be a path (no PATH search: callers resolve it once, with
// find_on_path, so that what they record names the binary that runs).
// Throws SystemError when the process cannot be started (no such file, not
// executable, a bad cwd, an output_file that cannot be created, an empty
// argv); a program that starts and then fails is a result, not a throw.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// The first executable file called `name` on $PATH (a name with a '/' is
// checked as it is), or an empty path.
std::filesystem::path find_on_path(const std::string& name);

// The tail of a program's output from the start of its `count`-th line
// from the end (a final newline ends the last line), for error messages.
std::string last_lines(const std::string& output, size_t count);

}  // namespace kforge
