#include "cuda_tools.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <deque>
#include <mutex>

#include "kforge/core/errno_text.h"
#include "kforge/core/process.h"

namespace kforge::env::internal {
namespace {

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
// A disassembly beyond this is not one a tool can use: the utility is
// stopped there rather than filling memory.
constexpr size_t kMaxToolOutputBytes = size_t{256} << 20;
std::mutex g_cache_mutex;
std::deque<CacheEntry> g_cache;

}  // namespace

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
  ProcessOptions options;
  options.timeout_s = config.tool_timeout_s;
  options.separate_stderr = true;
  options.max_output_bytes = kMaxToolOutputBytes;
  options.kill_on_overflow = true;
  const ProcessResult r = run_process(argv, options);
  if (r.output_truncated) {
    throw SystemError(argv[0] + " wrote more than " + std::to_string(kMaxToolOutputBytes >> 20) + " MiB of output");
  }
  if (r.timed_out) {
    throw SystemError(tool + " did not finish within " + std::to_string(static_cast<int>(config.tool_timeout_s)) +
                      " s on " + file.filename().string());
  }
  if (r.exit_code != 0) {
    std::string err = r.error_output.empty() ? r.output : r.error_output;
    if (err.size() > 600) err = err.substr(0, 600) + "...";
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    throw SystemError(tool + " failed on " + file.filename().string() + " (exit code " + std::to_string(r.exit_code) +
                      "): " + err);
  }
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_cache.push_back({key, r.output});
  if (g_cache.size() > kCacheEntries) g_cache.pop_front();
  return r.output;
}

}  // namespace kforge::env::internal

namespace kforge::env {

std::optional<std::filesystem::path> find_cuda_binary_tool(const std::string& name, const AnalysisConfig& config) {
  return internal::find_cuda_tool(name, config);
}

}  // namespace kforge::env
