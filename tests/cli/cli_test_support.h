// What the `kforge` command tests share (cli_test.cpp,
// cli_hostile_files_test.cpp): running the real executable built in this tree
// as a child process, with its exit code and output, and the fixtures of
// tests/gym/data as command-line arguments.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace kforge::testing {

inline const std::filesystem::path kData = std::filesystem::path(KFORGE_SOURCE_DIR) / "tests/gym/data";

struct CmdResult {
  int code = -1;
  std::string output;  // stdout and stderr
  std::string out;     // stdout only
};

// `wrapper` runs before the executable (e.g. "timeout 120").
inline CmdResult run_kforge(const std::string& args, bool merge_stderr = true, const std::string& wrapper = "") {
  // Compiled candidates are shared with the gym tests through one cache.
  const std::string cache = std::string(KFORGE_BINARY_DIR) + "/tests/gym/compile-cache";
  const std::string cmd = "KFORGE_CACHE_DIR='" + cache + "' " + wrapper + " '" + std::string(KFORGE_BINARY_DIR) +
                          "/cli/kforge' " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  CmdResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = r.output;
  return r;
}

inline std::string task_arg() { return "--task '" + (kData / "scale_bias_relu.json").string() + "'"; }
// For reports that must carry a speedup: see testing::timed_test_task().
inline std::string timed_task_arg() { return "--task '" + (kData / "scale_bias_relu_timed.json").string() + "'"; }
inline std::string config_arg() { return "--config '" + (kData / "fast.yaml").string() + "'"; }
inline std::string solution_arg(const std::string& name) {
  return "--solution '" + (kData / (name + ".cpp")).string() + "'";
}

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace kforge::testing
