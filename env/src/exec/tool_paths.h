// Where the judge and runner executables are. Resolution order: the config's
// tools_dir, $KFORGE_TOOLS_DIR, the directory of the running executable (an
// installed layout keeps them side by side), the build tree's bin/ (for tests
// and benchmarks run from the build directory).
#pragma once

#include <filesystem>

namespace kforge::exec {

struct ToolPaths {
  std::filesystem::path judge;
  std::filesystem::path runner;
};

// Throws SystemError listing every place it looked.
ToolPaths resolve_tool_paths(const std::filesystem::path& configured_dir);

}  // namespace kforge::exec
