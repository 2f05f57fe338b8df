// A child process we started and must reap: spawn with an explicit fd map,
// bounded waits, SIGKILL, and exit statuses described the way reports need
// them ("SIGSEGV", "exit code 3").
//
// Only waitpid(pid) is ever used, never waitpid(-1): the host process may have
// other children (compilers) that are not ours to reap.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kforge::ipc {

struct SpawnSpec {
  std::filesystem::path executable;
  std::vector<std::string> args;  // argv[1..]
  // (child fd, parent fd): the parent fd appears in the child under the given
  // number; every other descriptor is closed in the child before exec.
  std::vector<std::pair<int, int>> fds;
};

// Child side of the contract: dies with the parent (PR_SET_PDEATHSIG), and
// exits at once if the parent is already gone. `expected_parent` comes from the
// command line because getppid() may already have changed to a reaper.
void die_with_parent(pid_t expected_parent);
// Closes every descriptor >= `first`, so nothing inherited by accident survives.
void close_descriptors_from(int first);

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // kills and reaps a child that is still ours
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // posix_spawn (vfork-style, cheap even from a process with a large address
  // space such as the judge with libtorch), signals reset to default and unblocked.
  // Throws SystemError if the executable cannot be started.
  static ChildProcess spawn(const SpawnSpec& spec);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !status_; }
  std::optional<int> status() const { return status_; }  // raw waitpid status once reaped

  // Reaps without blocking; the status once the child has exited.
  std::optional<int> poll_exit();
  // Waits up to `ms` for the child to exit by itself.
  std::optional<int> wait_for(double ms);
  // SIGKILL (if still running) and a blocking reap; returns the status.
  int kill_and_reap();

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

std::string signal_name(int sig);  // "SIGSEGV"; "signal 42" for unnamed ones
// "SIGSEGV", "SIGABRT", "exit code 3", "exit code 0".
std::string describe_exit_status(int status);

}  // namespace kforge::ipc
