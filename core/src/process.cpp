#include "kforge/core/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "kforge/core/elapsed.h"
#include "kforge/core/errno_text.h"
#include "kforge/core/error.h"
#include "kforge/core/unique_fd.h"

extern char** environ;

namespace kforge {
namespace {

using Clock = std::chrono::steady_clock;

// Everything the child needs, made before fork: between fork and exec it may
// only make async-signal-safe calls (other threads may hold malloc's locks).
struct ChildPlan {
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::vector<char*> c_args;
  std::vector<char*> c_env;
  std::string cwd;
  rlimit memory{};
  bool limit_memory = false;
  // What becomes the child's stdout and stderr (the write ends).
  UniqueFd out_write;
  UniqueFd err_write;  // invalid: stderr goes where stdout goes
  // Our ends: the captured streams (invalid when not captured).
  UniqueFd out_read;
  UniqueFd err_read;
  // Why exec failed, through a close-on-exec pipe; empty read: it worked.
  UniqueFd report_read;
  UniqueFd report_write;
};

std::vector<std::string> child_environment(const std::map<std::string, std::optional<std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    if (overrides.count(entry.substr(0, entry.find('='))) == 0) env.push_back(entry);
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

// O_CLOEXEC: children that other threads start at the same time must not
// inherit our ends, or our EOF would wait for them.
void make_pipe(UniqueFd* read_end, UniqueFd* write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw SystemError("cannot create a pipe: " + errno_text());
  read_end->reset(fds[0]);
  write_end->reset(fds[1]);
}

ChildPlan plan_child(const std::vector<std::string>& argv, const ProcessOptions& options) {
  ChildPlan plan;
  plan.args = argv;
  plan.env = child_environment(options.env);
  plan.c_args = c_strings(plan.args);
  plan.c_env = c_strings(plan.env);
  plan.cwd = options.cwd.string();
  plan.limit_memory = options.memory_limit_bytes > 0;
  plan.memory.rlim_cur = plan.memory.rlim_max = static_cast<rlim_t>(options.memory_limit_bytes);
  if (!options.output_file.empty()) {
    plan.out_write.reset(::open(options.output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!plan.out_write) {
      throw SystemError("cannot start " + argv[0] + ": cannot create " + options.output_file.string() + ": " +
                        errno_text());
    }
  } else {
    make_pipe(&plan.out_read, &plan.out_write);
    if (options.separate_stderr) make_pipe(&plan.err_read, &plan.err_write);
  }
  make_pipe(&plan.report_read, &plan.report_write);
  return plan;
}

[[noreturn]] void child_fail(int report_fd) {
  const int err = errno;
  ssize_t ignored = ::write(report_fd, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

// In the child, after fork: async-signal-safe calls only.
[[noreturn]] void exec_child(const ChildPlan& plan) {
  const int report = plan.report_write.get();
  // Own process group (killable as a tree), default dispositions, no mask.
  ::setpgid(0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
  }
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  const int devnull = ::open("/dev/null", O_RDONLY);
  const int err_target = plan.err_write ? plan.err_write.get() : plan.out_write.get();
  if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(plan.out_write.get(), 1) < 0 || ::dup2(err_target, 2) < 0) {
    child_fail(report);
  }
  if (!plan.cwd.empty() && ::chdir(plan.cwd.c_str()) != 0) child_fail(report);
  if (plan.limit_memory && ::setrlimit(RLIMIT_AS, &plan.memory) != 0) child_fail(report);
  ::execve(plan.c_args[0], plan.c_args.data(), plan.c_env.data());
  child_fail(report);
}

// Forks and execs; returns once the child runs the program, or throws why
// it could not (the child is reaped then).
pid_t start_child(ChildPlan& plan, const std::string& program) {
  const pid_t pid = ::fork();
  if (pid < 0) throw SystemError("cannot start " + program + ": fork: " + errno_text());
  if (pid == 0) exec_child(plan);
  // Also from this side, so that a timeout that comes before the child ran
  // setpgid still kills the group (EACCES once it has exec'ed: it did).
  ::setpgid(pid, pid);
  plan.out_write.reset();
  plan.err_write.reset();
  plan.report_write.reset();
  int exec_error = 0;
  ssize_t got;
  do {
    got = ::read(plan.report_read.get(), &exec_error, sizeof(exec_error));
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof(exec_error))) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw SystemError("cannot start " + program + ": " + errno_text(exec_error));
  }
  return pid;
}

Clock::time_point deadline_after(Clock::time_point start, double timeout_s) {
  // Saturating: no deadline, or one too far away to represent, is never.
  const double room_s = std::chrono::duration<double>(Clock::time_point::max() - start).count();
  if (!(timeout_s < room_s)) return Clock::time_point::max();
  return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(timeout_s, 0.0)));
}

int poll_timeout_ms(Clock::time_point deadline) {
  const double left = elapsed_ms(Clock::now(), deadline);
  return static_cast<int>(std::clamp(std::ceil(left), 0.0, 1000.0));  // at most 1 s: EINTR-proof re-check
}

// One captured stream: appended up to the bound, the rest counted as dropped.
struct Capture {
  int fd = -1;
  std::string* into = nullptr;
  bool open = false;
};

// Reads the captured streams until both reach EOF, the deadline passes or,
// with kill_on_overflow, a stream overflows. Sets timed_out and
// output_truncated.
void collect_output(ChildPlan& plan, Clock::time_point deadline, const ProcessOptions& options, ProcessResult* result) {
  Capture streams[2] = {{plan.out_read.get(), &result->output, plan.out_read.valid()},
                        {plan.err_read.get(), &result->error_output, plan.err_read.valid()}};
  char buf[65536];
  while (streams[0].open || streams[1].open) {
    if (Clock::now() >= deadline) {
      result->timed_out = true;
      return;
    }
    pollfd fds[2];
    Capture* polled[2];
    nfds_t n = 0;
    for (auto& s : streams) {
      if (!s.open) continue;
      polled[n] = &s;
      fds[n++] = {s.fd, POLLIN, 0};
    }
    const int ready = ::poll(fds, n, poll_timeout_ms(deadline));
    if (ready <= 0) continue;  // EINTR or nothing yet: check the deadline again
    for (nfds_t i = 0; i < n; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        polled[i]->open = false;  // EOF: every writer is gone
        continue;
      }
      std::string& into = *polled[i]->into;
      const size_t room = options.max_output_bytes - std::min(options.max_output_bytes, into.size());
      into.append(buf, std::min(room, static_cast<size_t>(got)));
      if (static_cast<size_t>(got) > room) {
        result->output_truncated = true;
        if (options.kill_on_overflow) return;
      }
    }
  }
}

// Waits for the child, killing its group at the deadline (or at once with
// `kill_now`); fills the exit status and peak memory.
void reap(pid_t pid, Clock::time_point deadline, bool kill_now, const std::string& program, ProcessResult* result) {
  if (kill_now) ::kill(-pid, SIGKILL);
  bool killed = kill_now;
  int status = 0;
  struct rusage usage {};
  auto nap = std::chrono::milliseconds(1);
  for (;;) {
    // Without a deadline there is nothing to wake up for.
    const bool block = killed || deadline == Clock::time_point::max();
    const pid_t w = ::wait4(pid, &status, block ? 0 : WNOHANG, &usage);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) throw SystemError("waitpid(" + program + "): " + errno_text());
    if (w != 0) continue;
    // Output closed (or not captured) and the process still runs: it has
    // until the deadline.
    if (Clock::now() >= deadline) {
      result->timed_out = true;
      ::kill(-pid, SIGKILL);
      killed = true;
    } else {
      // Short at first (a compiler's last child exits right after it closes
      // its output), then no more than 20 wake-ups a second.
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::milliseconds(50));
    }
  }
  if (WIFEXITED(status)) {
    result->exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result->term_signal = WTERMSIG(status);
  }
  result->peak_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty() || argv[0].empty()) throw SystemError("run_process: the command (argv) is empty");
  const auto start = Clock::now();
  const auto deadline = deadline_after(start, options.timeout_s);
  ChildPlan plan = plan_child(argv, options);
  const pid_t pid = start_child(plan, argv[0]);
  ProcessResult result;
  collect_output(plan, deadline, options, &result);
  // Our read ends stay open until the child is reaped: closed first, a child
  // we are about to kill could die of SIGPIPE instead, and the result would
  // not say that we stopped it.
  const bool overflow_kill = result.output_truncated && options.kill_on_overflow;
  reap(pid, deadline, result.timed_out || overflow_kill, argv[0], &result);
  if (result.output_truncated && !options.kill_on_overflow) {
    result.output += "\n[output truncated at " + std::to_string(options.max_output_bytes) + " bytes]\n";
  }
  result.wall_ms = ms_since(start);
  return result;
}

std::filesystem::path find_on_path(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): nothing in the tree calls setenv
  const std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t colon = dirs.find(':', start);
    const std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    std::error_code ec;
    if (::access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate, ec)) return candidate;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return {};
}

std::string last_lines(const std::string& output, size_t count) {
  size_t pos = output.size();
  for (size_t i = 0; i < count && pos > 0; ++i) {
    pos = output.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
  }
  return output.substr(pos == 0 ? 0 : pos + 1);
}

}  // namespace kforge
