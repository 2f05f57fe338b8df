// What the `kforge` command tests share (cli_test.cpp,
// cli_hostile_files_test.cpp): running the real executable built in this tree
// as a child process, with its exit code and output, and the fixtures of
// tests/gym/data as command-line arguments.
#pragma once

#include <filesystem>
#include <limits>
#include <string>

#include "kforge/core/process.h"

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
  // The arguments are written as a shell reads them (quoted paths), so
  // /bin/sh runs the line, named as the program.
  const std::string cmd = wrapper + " '" + std::string(KFORGE_BINARY_DIR) + "/cli/kforge' " + args;
  ProcessOptions options;
  options.env["KFORGE_CACHE_DIR"] = cache;
  options.separate_stderr = !merge_stderr;                      // then stdout only in `output`
  options.timeout_s = std::numeric_limits<double>::infinity();  // the wrapper or ctest bounds it
  options.max_output_bytes = size_t{256} << 20;
  const ProcessResult p = run_process({"/bin/sh", "-c", cmd}, options);
  CmdResult r;
  r.code = p.exit_code;
  r.output = p.output;
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
