// Finding and running the CUDA binary utilities (cuobjdump, nvdisasm) that
// the tools read binaries with. They are absent from some machines (the dev
// and CI hosts have nvcc and ptxas only), so "not found" is a distinct error
// that tools report as such, never a crash.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/error.h"
#include "kforge/env/analysis.h"

namespace kforge::env::internal {

// The utility is not installed where we looked; the message says where.
class ToolUnavailable : public SystemError {
 public:
  explicit ToolUnavailable(const std::string& message) : SystemError(message) {}
};

std::vector<std::filesystem::path> tool_search_dirs(const AnalysisConfig& config);
std::optional<std::filesystem::path> find_cuda_tool(const std::string& name, const AnalysisConfig& config);

// `<tool> <args...> <file>`'s stdout. Results are cached by (tool, args, file,
// size, modification time), so several tools reading one artifact run the
// utility once. Throws ToolUnavailable when the utility is not found and
// SystemError when it fails (with its stderr).
std::string run_cuda_tool(const std::string& tool, const std::vector<std::string>& args,
                          const std::filesystem::path& file, const AnalysisConfig& config);

}  // namespace kforge::env::internal
