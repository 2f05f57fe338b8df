// Analysis tools: actions the policy can call to learn about its own kernel
// without running it (KernelPro-style micro-profiling). Each tool reads the
// compiled artifact (compiler report, SASS) and returns facts as JSON, concrete
// hints, and a chat-ready rendering of both.
//
// Tools are plugins: a class deriving from AnalysisTool, added to a registry.
// The environment exposes every registered tool to the policy as an
// OpenAI-style function (AnalysisRegistry::definitions) and dispatches
// `analyze` actions by name (AnalysisRegistry::run); adding a tool never
// touches the environment. Built-in tools: resource_usage, sass_mix, occupancy
// (docs/analysis-tools.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/solution.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/compiler.h"

namespace kforge::env {

// The device an analysis is about. Per-SM limits come from the architecture
// table (kforge/env/analysis/occupancy.h) unless the device reported its own
// (cudaGetDeviceProperties on the GPU host): a value of 0 means "use the table".
struct DeviceProperties {
  std::string name = "NVIDIA H200";
  std::string arch = "sm_90a";  // the target candidates are built for
  int sm_count = 132;
  int max_threads_per_sm = 0;
  int max_threads_per_block = 0;
  int max_blocks_per_sm = 0;
  int registers_per_sm = 0;
  int64_t shared_bytes_per_sm = 0;
  int64_t shared_bytes_per_block_optin = 0;
  int64_t reserved_shared_bytes_per_block = 0;
  int64_t l2_bytes = 0;

  // The target GPU, an H200 (132 SMs, 60 MiB L2, candidates built for sm_90a).
  static DeviceProperties h200();
};

json to_json(const DeviceProperties& device);
// Keys as in the struct; unknown keys are errors.
DeviceProperties parse_device_properties(const Field& field);

// How tools find and run the CUDA binary utilities.
struct AnalysisConfig {
  // Folders searched for cuobjdump / nvdisasm, in order. Empty: $KFORGE_CUDA_BIN,
  // $CUDA_HOME/bin, $CUDA_PATH/bin, every folder of $PATH, /usr/local/cuda/bin.
  std::vector<std::filesystem::path> tool_dirs;
  double tool_timeout_s = 60.0;
  // The rendered text is cut to this many characters (facts are never cut).
  size_t max_text_chars = 4000;
};

// Where a CUDA binary utility ("cuobjdump", "nvdisasm") is, searched as the
// tools search for it; nullopt where it is not installed (the dev and CI
// hosts have none), so callers can skip work that would only feed it.
std::optional<std::filesystem::path> find_cuda_binary_tool(const std::string& name, const AnalysisConfig& config = {});

// Everything a tool may look at. Pointers may be null where the caller has
// nothing (a tool that needs one reports a clear error).
struct AnalysisInput {
  const TaskSpec* task = nullptr;
  const Solution* solution = nullptr;
  const Artifact* artifact = nullptr;  // the compiled solution
  DeviceProperties device = DeviceProperties::h200();
  json args = json::object();  // the tool's arguments, as the policy sent them
  AnalysisConfig config;

  // The solution's mode (from the solution, else the artifact); nullopt if neither.
  std::optional<SolutionMode> mode() const;
};

struct AnalysisResult {
  std::string tool;
  bool ok = false;
  json facts = json::object();
  std::vector<std::string> hints;  // concrete, actionable sentences
  std::string text;                // for the policy: facts summary + hints
  std::string error;               // why the tool could not run (ok == false)
};

json to_json(const AnalysisResult& result);
AnalysisResult analysis_result_from_json(const json& j);

class AnalysisTool {
 public:
  virtual ~AnalysisTool() = default;

  // snake_case, unique in a registry; the policy calls the tool by this name.
  virtual std::string name() const = 0;
  // One paragraph for the policy: what it returns and when it helps.
  virtual std::string description() const = 0;
  // JSON Schema of the arguments: {"type": "object", "properties": {...},
  // "additionalProperties": false}; every property has a description.
  virtual json parameters() const = 0;
  // The solution modes whose artifacts this tool understands.
  virtual std::vector<SolutionMode> modes() const = 0;
  // Reads `args` with an ObjectReader; throws InputError naming the field.
  // The registry calls it before run(), so run() may rely on valid args.
  virtual void validate_args(const json& args) const = 0;
  // Fills facts, hints and text (the body; the registry adds the header and the
  // hint list). A tool that cannot run returns ok = false with `error`, or
  // throws InputError / SystemError, which the registry turns into `error`.
  virtual AnalysisResult run(const AnalysisInput& input) const = 0;

  bool applies_to(SolutionMode mode) const;
  // {"type": "function", "function": {"name", "description", "parameters"}}.
  json definition() const;
};

// Built-in tools, for registries composed by hand.
std::unique_ptr<AnalysisTool> make_resource_usage_tool();
std::unique_ptr<AnalysisTool> make_sass_mix_tool();
std::unique_ptr<AnalysisTool> make_occupancy_tool();

// A set of tools by name. Thread-safe: run() may be called from many threads,
// also while another thread adds a tool.
class AnalysisRegistry {
 public:
  AnalysisRegistry() = default;  // empty
  AnalysisRegistry(const AnalysisRegistry&) = delete;
  AnalysisRegistry& operator=(const AnalysisRegistry&) = delete;

  // The process-wide registry: the built-in tools plus whatever plugins add
  // (KFORGE_REGISTER_ANALYSIS_TOOL or global().add()).
  static AnalysisRegistry& global();
  // A fresh registry holding the built-in tools only.
  static std::unique_ptr<AnalysisRegistry> with_builtin_tools();

  // Throws std::invalid_argument for an empty, malformed, duplicate or reserved
  // name (the environment's own actions: compile, verify, profile, submit,
  // analyze), or a tool whose parameters() is not an object schema.
  void add(std::shared_ptr<const AnalysisTool> tool);
  bool contains(const std::string& name) const;
  std::shared_ptr<const AnalysisTool> find(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted

  // OpenAI-style tool definitions, sorted by name; with `mode`, only the tools
  // that apply to it.
  json definitions(std::optional<SolutionMode> mode = std::nullopt) const;

  // Never throws for bad input: an unknown tool (with a did-you-mean and the
  // list of tools), bad arguments, a mode the tool does not handle, or a tool
  // that cannot run here all come back as ok = false with `error` and `text`.
  AnalysisResult run(const std::string& tool, const AnalysisInput& input) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const AnalysisTool>> tools_;
};

}  // namespace kforge::env

// Registers a tool class with AnalysisRegistry::global() at static
// initialization: `KFORGE_REGISTER_ANALYSIS_TOOL(MyTool);` at namespace scope
// in the tool's .cpp. The object file must be linked into the program (a
// source of the executable, or a library linked whole): the linker drops
// unreferenced objects of static libraries, and their registrations with them.
#define KFORGE_REGISTER_ANALYSIS_TOOL(ToolClass)                                        \
  static const bool kforge_analysis_tool_registered_##ToolClass = [] {                  \
    ::kforge::env::AnalysisRegistry::global().add(std::make_shared<const ToolClass>()); \
    return true;                                                                        \
  }()
