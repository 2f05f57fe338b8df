#include "exec/tool_paths.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "kforge/core/error.h"

namespace kforge::exec {
namespace {

bool is_executable(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

ToolPaths resolve_tool_paths(const std::filesystem::path& configured_dir) {
  std::vector<std::filesystem::path> candidates;
  if (!configured_dir.empty()) {
    candidates.push_back(configured_dir);
  } else {
    if (const char* env = std::getenv("KFORGE_TOOLS_DIR"); env != nullptr && *env != '\0') candidates.emplace_back(env);
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates.push_back(self.parent_path());
    candidates.emplace_back(KFORGE_TOOLS_BUILD_DIR);
  }
  std::string tried;
  for (const auto& dir : candidates) {
    ToolPaths p{dir / "kforge-judge", dir / "kforge-runner"};
    if (is_executable(p.judge) && is_executable(p.runner)) return p;
    tried += (tried.empty() ? "" : ", ") + dir.string();
  }
  throw SystemError("kforge-judge and kforge-runner not found (looked in: " + tried +
                    "); build them or set ExecutorConfig::tools_dir or KFORGE_TOOLS_DIR");
}

}  // namespace kforge::exec
