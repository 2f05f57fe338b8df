#include "resource_source.h"

#include <cctype>
#include <set>

#include "cuda_tools.h"
#include "tool_util.h"

namespace kforge::env::internal {
namespace {

// A fat binary can hold the same kernels for several targets; the device runs
// the one for its own arch (exact match first, then the same base arch).
std::vector<KernelResources> keep_device_arch(std::vector<KernelResources> kernels, const std::string& arch) {
  std::set<std::string> archs;
  for (const auto& k : kernels) archs.insert(k.arch);
  if (archs.size() <= 1) return kernels;
  auto keep = [&](const std::string& wanted) {
    std::vector<KernelResources> out;
    for (const auto& k : kernels) {
      if (k.arch == wanted) out.push_back(k);
    }
    return out;
  };
  if (archs.count(arch)) return keep(arch);
  std::string base = arch;
  while (base.size() > 3 && std::isalpha(static_cast<unsigned char>(base.back()))) base.pop_back();
  if (archs.count(base)) return keep(base);
  return kernels;
}

}  // namespace

ResourceReport obtain_resources(const AnalysisInput& input) {
  const Artifact& artifact = require_artifact(input);
  ResourceReport report;
  if (artifact.resources.is_object() && !artifact.resources.empty()) {
    report.source = "compiler report";
    report.kernels = resources_from_json(artifact.resources);
  } else {
    std::string text;
    try {
      text = run_cuda_tool("cuobjdump", {"--dump-resource-usage"}, artifact.path, input.config);
    } catch (const ToolUnavailable& e) {
      throw ToolUnavailable(std::string("resource usage is not available: the compile step recorded no compiler "
                                        "report for this binary, and ") +
                            e.what());
    }
    report.source = "cuobjdump";
    report.kernels = parse_cuobjdump_resource_usage(text);
    if (report.kernels.empty()) {
      throw SystemError("cuobjdump found no device code in " + artifact.path.filename().string());
    }
    if (remove_reserved_shared(report.kernels, input.device.arch) > 0) {
      report.notes.push_back(
          "static shared memory is cuobjdump's SHARED less the 1 KB per block the driver reserves "
          "(cuobjdump counts it on sm_90 and newer)");
    }
  }
  report.kernels = keep_device_arch(std::move(report.kernels), input.device.arch);
  return report;
}

}  // namespace kforge::env::internal
