#include "kforge/env/compile/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
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

// Owns the spawn attributes so every early return releases them.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw SystemError("run_process: empty command");
  const auto start = Clock::now();
  // O_CLOEXEC: children spawned concurrently by other threads must not
  // inherit our write end, or our EOF would wait for them.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw SystemError(std::string("pipe2: ") + std::strerror(errno));

  SpawnSetup setup;
  posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&setup.actions, fds[1], 2);
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&setup.actions, options.cwd.c_str());
  // Own process group (killable as a tree), default signal dispositions and
  // an empty mask whatever the embedding program did to its own.
  posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&setup.attr, &empty);
  sigset_t all;
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  posix_spawnattr_setsigdefault(&setup.attr, &all);

  std::vector<std::string> args = argv;
  std::vector<std::string> env = child_environment(options.env);
  std::vector<char*> c_args = c_strings(args);
  std::vector<char*> c_env = c_strings(env);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &setup.actions, &setup.attr, c_args.data(), c_env.data());
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw SystemError("cannot start " + argv[0] + ": " + std::strerror(rc));
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
  for (;;) {
    const pid_t w = waitpid(pid, &status, killed ? 0 : WNOHANG);
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
