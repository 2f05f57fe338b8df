#include "kforge/env/compile/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "kforge/core/error.h"

extern char** environ;

namespace kforge::env {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> child_environment(const std::map<std::string, std::optional<std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    if (overrides.count(key) == 0) env.push_back(entry);
  }
  for (const auto& [key, value] : overrides) {
    if (value) env.push_back(key + "=" + *value);
  }
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Reports why exec failed through a close-on-exec pipe; an empty read
// means exec succeeded.
[[noreturn]] void child_fail(int report_fd, int err) {
  ssize_t ignored = write(report_fd, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw SystemError("run_process: empty command");
  const auto start = Clock::now();
  // O_CLOEXEC: children spawned concurrently by other threads must not
  // inherit our write end, or our EOF would wait for them.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw SystemError(std::string("pipe2: ") + std::strerror(errno));
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    close(fds[0]);
    close(fds[1]);
    throw SystemError(std::string("pipe2: ") + std::strerror(errno));
  }

  // Everything the child needs is prepared here: between fork and exec it
  // may only make async-signal-safe calls (other threads may hold malloc's
  // locks). fork, not posix_spawn: the memory limit has to be set in the
  // child before exec, which posix_spawn has no attribute for, and setting
  // it afterwards with prlimit would race with the compiler's first fork.
  std::vector<std::string> args = argv;
  std::vector<std::string> env = child_environment(options.env);
  std::vector<char*> c_args = c_strings(args);
  std::vector<char*> c_env = c_strings(env);
  const std::string cwd = options.cwd.string();
  sigset_t empty;
  sigemptyset(&empty);
  struct rlimit memory {};
  memory.rlim_cur = memory.rlim_max = static_cast<rlim_t>(options.memory_limit_bytes);

  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {fds[0], fds[1], report[0], report[1]}) close(fd);
    throw SystemError("cannot start " + argv[0] + ": fork: " + std::strerror(err));
  }
  if (pid == 0) {
    // Own process group (killable as a tree), default signal dispositions
    // and an empty mask whatever the embedding program did to its own.
    setpgid(0, 0);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
    }
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[1], 2) < 0) {
      child_fail(report[1], errno);
    }
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) child_fail(report[1], errno);
    if (options.memory_limit_bytes > 0 && setrlimit(RLIMIT_AS, &memory) != 0) child_fail(report[1], errno);
    execve(c_args[0], c_args.data(), c_env.data());
    child_fail(report[1], errno);
  }
  // Also from this side, so that a timeout that comes before the child ran
  // setpgid still kills the group (EACCES once it has exec'ed: it did).
  setpgid(pid, pid);
  close(fds[1]);
  close(report[1]);
  int exec_error = 0;
  ssize_t got;
  do {
    got = read(report[0], &exec_error, sizeof(exec_error));
  } while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof(exec_error))) {
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw SystemError("cannot start " + argv[0] + ": " + std::strerror(exec_error));
  }

  ProcessResult result;
  const auto deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.timeout_s));
  bool truncated = false;
  char buf[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: every writer is gone
    const size_t room = options.max_output_bytes - std::min(options.max_output_bytes, result.output.size());
    result.output.append(buf, std::min(room, static_cast<size_t>(n)));
    truncated = truncated || static_cast<size_t>(n) > room;
  }
  close(fds[0]);

  int status = 0;
  bool killed = false;
  if (result.timed_out) {
    kill(-pid, SIGKILL);
    killed = true;
  }
  struct rusage usage {};
  for (;;) {
    const pid_t w = wait4(pid, &status, killed ? 0 : WNOHANG, &usage);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) throw SystemError("waitpid(" + argv[0] + "): " + std::strerror(errno));
    if (w == 0) {
      // Output closed but the process lingers: give it until the deadline.
      if (Clock::now() >= deadline) {
        result.timed_out = true;
        kill(-pid, SIGKILL);
        killed = true;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  result.peak_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  if (truncated) result.output += "\n[output truncated at " + std::to_string(options.max_output_bytes) + " bytes]\n";
  result.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return result;
}

std::filesystem::path find_on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t colon = dirs.find(':', start);
    const std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate)) return candidate;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return {};
}

}  // namespace kforge::env
