#include "ipc/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "kforge/core/errno_text.h"
#include "kforge/core/error.h"
#include "kforge/core/unique_fd.h"

extern char** environ;

namespace kforge::ipc {

void die_with_parent(pid_t expected_parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent may have died between fork and prctl; then nobody would ever
  // send the signal.
  if (expected_parent > 0 && ::getppid() != expected_parent) ::_exit(125);
}

void close_descriptors_from(int first) {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, static_cast<unsigned>(first), ~0u, 0u) == 0) return;
#endif
  long max_fd = ::sysconf(_SC_OPEN_MAX);
  for (long fd = first; fd < max_fd; ++fd) ::close(static_cast<int>(fd));
}

ChildProcess::~ChildProcess() {
  if (running()) kill_and_reap();
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), status_(std::exchange(other.status_, std::nullopt)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (running()) kill_and_reap();
    pid_ = std::exchange(other.pid_, -1);
    status_ = std::exchange(other.status_, std::nullopt);
  }
  return *this;
}

ChildProcess ChildProcess::spawn(const SpawnSpec& spec) {
  // dup2(x, x) would keep close-on-exec set, and a parent fd inside the target
  // range could be overwritten before it is duplicated: move sources out of
  // the way first (the copies are close-on-exec and closed below).
  int max_target = 2;
  for (const auto& [child_fd, parent_fd] : spec.fds) max_target = std::max(max_target, child_fd);
  std::vector<UniqueFd> moved;
  std::vector<std::pair<int, int>> fds;
  for (const auto& [child_fd, parent_fd] : spec.fds) {
    int src = parent_fd;
    if (src <= max_target) {
      int copy = ::fcntl(parent_fd, F_DUPFD_CLOEXEC, max_target + 1);
      if (copy < 0) throw SystemError("spawn: cannot duplicate descriptor: " + errno_text(errno));
      moved.emplace_back(copy);
      src = copy;
    }
    fds.emplace_back(child_fd, src);
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (const auto& [child_fd, src] : fds) posix_spawn_file_actions_adddup2(&actions, src, child_fd);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // Whatever the parent has open without close-on-exec (other libraries of
  // the host are not ours to audit) is closed before the child's own
  // libraries load; closing later could pull descriptors from under them.
  posix_spawn_file_actions_addclosefrom_np(&actions, max_target + 1);
#endif
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::string exe = spec.executable.string();
  std::vector<std::string> storage;
  storage.push_back(exe);
  storage.insert(storage.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);

  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, exe.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw SystemError("cannot start " + exe + ": " + errno_text(rc));
  ChildProcess child;
  child.pid_ = pid;
  return child;
}

std::optional<int> ChildProcess::poll_exit() {
  if (status_ || pid_ <= 0) return status_;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) status_ = status;
  return status_;
}

std::optional<int> ChildProcess::wait_for(double ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
  // Short sleeps instead of a pidfd: exits we wait for are imminent (the
  // control socket already closed), so the latency cost is negligible.
  auto nap = std::chrono::microseconds(50);
  while (!poll_exit()) {
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(2000));
  }
  return status_;
}

int ChildProcess::kill_and_reap() {
  if (pid_ <= 0) return 0;
  if (!poll_exit()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid_, &status, 0);
    } while (r < 0 && errno == EINTR);
    status_ = status;
  }
  return *status_;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGSYS:
      return "SIGSYS";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGALRM:
      return "SIGALRM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    default:
      return "signal " + std::to_string(sig);
  }
}

std::string describe_exit_status(int status) {
  if (WIFSIGNALED(status)) return signal_name(WTERMSIG(status));
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  return "status " + std::to_string(status);
}

}  // namespace kforge::ipc
