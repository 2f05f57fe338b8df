#include "cuda_tools.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <mutex>

#include "kforge/core/errno_text.h"

extern char** environ;

namespace kforge::env::analysis_detail {
namespace {

class Pipe {
 public:
  Pipe() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) throw SystemError("cannot create a pipe: " + errno_text(errno));
  }
  ~Pipe() {
    close_read();
    close_write();
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  void close_read() {
    if (fds_[0] >= 0) ::close(fds_[0]);
    fds_[0] = -1;
  }
  void close_write() {
    if (fds_[1] >= 0) ::close(fds_[1]);
    fds_[1] = -1;
  }

 private:
  int fds_[2] = {-1, -1};
};

std::string getenv_string(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): nothing in this process calls setenv
  return v ? std::string(v) : std::string();
}

bool is_executable_file(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return false;
  return ::access(p.c_str(), X_OK) == 0;
}

struct CacheEntry {
  std::string key;
  std::string output;
};

// Small on purpose: an episode asks a few tools about its latest artifact.
constexpr size_t kCacheEntries = 32;
std::mutex g_cache_mutex;
std::deque<CacheEntry> g_cache;

}  // namespace

ProcessOutput run_process(const std::vector<std::string>& argv, double timeout_s, size_t max_output) {
  if (argv.empty()) throw SystemError("run_process: empty command");
  Pipe out_pipe;
  Pipe err_pipe;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe.write_end(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe.write_end(), STDERR_FILENO);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw SystemError("cannot start " + argv[0] + ": " + errno_text(rc));
  out_pipe.close_write();
  err_pipe.close_write();

  ProcessOutput result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool out_open = true;
  bool err_open = true;
  bool too_large = false;
  char buf[65536];
  while ((out_open || err_open) && !too_large) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd fds[2];
    nfds_t n = 0;
    if (out_open) fds[n++] = {out_pipe.read_end(), POLLIN, 0};
    if (err_open) fds[n++] = {err_pipe.read_end(), POLLIN, 0};
    const int ready = ::poll(fds, n, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (nfds_t i = 0; i < n; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const bool is_out = fds[i].fd == out_pipe.read_end();
      const ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        std::string& dst = is_out ? result.out : result.err;
        dst.append(buf, static_cast<size_t>(got));
        if (dst.size() > max_output) too_large = true;
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        (is_out ? out_open : err_open) = false;
      }
    }
  }
  if (result.timed_out || too_large) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (too_large) {
    throw SystemError(argv[0] + " wrote more than " + std::to_string(max_output >> 20) + " MiB of output");
  }
  return result;
}

std::vector<std::filesystem::path> tool_search_dirs(const AnalysisConfig& config) {
  if (!config.tool_dirs.empty()) return config.tool_dirs;
  std::vector<std::filesystem::path> dirs;
  const std::string explicit_dir = getenv_string("KFORGE_CUDA_BIN");
  if (!explicit_dir.empty()) dirs.emplace_back(explicit_dir);
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const std::string v = getenv_string(var);
    if (!v.empty()) dirs.emplace_back(std::filesystem::path(v) / "bin");
  }
  const std::string path = getenv_string("PATH");
  size_t start = 0;
  while (start <= path.size()) {
    const size_t colon = path.find(':', start);
    const std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!dir.empty()) dirs.emplace_back(dir);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  dirs.emplace_back("/usr/local/cuda/bin");
  return dirs;
}

std::optional<std::filesystem::path> find_cuda_tool(const std::string& name, const AnalysisConfig& config) {
  for (const auto& dir : tool_search_dirs(config)) {
    const auto candidate = dir / name;
    if (is_executable_file(candidate)) return candidate;
  }
  return std::nullopt;
}

std::string run_cuda_tool(const std::string& tool, const std::vector<std::string>& args,
                          const std::filesystem::path& file, const AnalysisConfig& config) {
  const auto exe = find_cuda_tool(tool, config);
  if (!exe) {
    std::string searched;
    for (const auto& d : tool_search_dirs(config)) searched += (searched.empty() ? "" : ", ") + d.string();
    throw ToolUnavailable(tool + " not found on this machine (searched " + searched + ")");
  }
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    throw SystemError("cannot read the artifact " + file.string() + ": " + errno_text(errno));
  }
  std::string key = exe->string();
  for (const auto& a : args) key += '\x1f' + a;
  key += '\x1f' + file.string() + '\x1f' + std::to_string(st.st_size) + '\x1f' + std::to_string(st.st_mtim.tv_sec) +
         '.' + std::to_string(st.st_mtim.tv_nsec);
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    for (const auto& e : g_cache) {
      if (e.key == key) return e.output;
    }
  }
  std::vector<std::string> argv = {exe->string()};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(file.string());
  ProcessOutput r = run_process(argv, config.tool_timeout_s);
  if (r.timed_out) {
    throw SystemError(tool + " did not finish within " + std::to_string(static_cast<int>(config.tool_timeout_s)) +
                      " s on " + file.filename().string());
  }
  if (r.exit_code != 0) {
    std::string err = r.err.empty() ? r.out : r.err;
    if (err.size() > 600) err = err.substr(0, 600) + "...";
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    throw SystemError(tool + " failed on " + file.filename().string() + " (exit code " + std::to_string(r.exit_code) +
                      "): " + err);
  }
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_cache.push_back({key, r.out});
  if (g_cache.size() > kCacheEntries) g_cache.pop_front();
  return r.out;
}

}  // namespace kforge::env::analysis_detail

namespace kforge::env {

std::optional<std::filesystem::path> find_cuda_binary_tool(const std::string& name, const AnalysisConfig& config) {
  return analysis_detail::find_cuda_tool(name, config);
}

}  // namespace kforge::env
