// Mode nvrtc: device code compiled by NVRTC to a CUBIN, with the launch plan
// validated against the task and each kernel's lowered (mangled) name
// resolved, so that templates such as "scale<float, 4>" can be launched.
//
// The compile itself runs in a kforge-nvrtc worker process
// (nvrtc_worker_pool.h), never in the environment's: an NVRTC compile cannot
// be interrupted, and a hostile source (a preprocessor bomb) would otherwise
// hang a thread of the environment and take its memory. ctx.timeout_s and
// ctx.memory_limit_bytes apply as for the subprocess compilers; pool threads
// compile concurrently in separate workers (docs/compile.md).
#include <nvrtc.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

#include "build_support.h"
#include "kforge/core/elapsed.h"
#include "kforge/core/error.h"
#include "kforge/env/compile/compilers.h"
#include "kforge/env/compile/diagnostics.h"
#include "kforge/env/compile/options.h"
#include "kforge/env/compile/resource_usage.h"
#include "kforge/env/cuda/launch_plan.h"
#include "nvrtc_worker_pool.h"

namespace kforge::env {
namespace {

const char* kDefaultStd = "-std=c++17";
// -Xptxas=-v has no effect on the code; it makes ptxas print resource usage
// into the program log.
const std::vector<std::string> kFixedFlags = {"-default-device", "--ptxas-options=-v"};

std::string nvrtc_version() {
  int major = 0;
  int minor = 0;
  if (nvrtcResult r = nvrtcVersion(&major, &minor); r != NVRTC_SUCCESS) {
    throw SystemError(std::string("nvrtcVersion: ") + nvrtcGetErrorString(r));
  }
  return std::to_string(major) + "." + std::to_string(minor);
}

// The plan's kernels by the names NVRTC lowered them to; what cannot be
// launched is returned as one line per kernel. Entry functions as ptxas
// compiled them: a name that lowers to a __device__ function is in the CUBIN
// but cannot be launched.
std::string lower_kernel_names(const NvrtcWorkerPool::Result& compiled, const json& resources, LaunchPlan* plan) {
  std::set<std::string> entries;
  for (const auto& [kernel, usage] : resources.items()) entries.insert(usage.value("mangled", ""));
  std::string missing;
  for (size_t i = 0; i < plan->kernels.size(); ++i) {
    KernelLaunchSpec& k = plan->kernels[i];
    const std::optional<std::string> lowered =
        i < compiled.lowered.size() ? compiled.lowered[i] : std::optional<std::string>();
    // Only where ptxas reported its entries: on the H200 machine the
    // NVRTC that was loaded (PyTorch's bundled copy) logged no ptxas
    // lines, and every plan was refused. Without them a device function
    // in the plan fails when the runner looks its kernel up instead.
    if (!lowered || (!entries.empty() && entries.count(*lowered) == 0)) {
      missing += "launch.kernels[" + std::to_string(i) + "].name \"" + k.name +
                 "\" is not a __global__ function (or template instantiation) of the source\n";
    } else {
      k.lowered_name = *lowered;
    }
  }
  return missing;
}

class NvrtcCompiler : public Compiler {
 public:
  NvrtcCompiler()
      : version_(nvrtc_version()),
        include_dirs_(default_cuda_include_dirs()),
        workers_(std::make_unique<NvrtcWorkerPool>(find_nvrtc_worker())) {
    // NVRTC's first compile in a process costs a few hundred ms: a worker
    // started now has it behind it by the first request.
    workers_->prestart();
  }

  SolutionMode mode() const override { return SolutionMode::kNvrtc; }

  std::string identity(const CompileContext& ctx) const override {
    std::string text = "nvrtc;version=" + version_ + ";arch=" + ctx.arch + ";flags=" + kDefaultStd;
    for (const auto& f : kFixedFlags) text += " " + f;
    for (const auto& d : include_dirs_) text += " --include-path=" + d.string();
    return text;
  }

  std::string precheck(const Solution& solution, const CompileContext& ctx) const override {
    const CheckedOptions options = check_nvrtc_options(solution.options);
    if (!options.error.empty()) return options.error;
    try {
      parse_plan(solution, ctx);
    } catch (const InputError& e) {
      return e.what();
    }
    return {};
  }

  CompileResult compile(const Solution& solution, const CompileContext& ctx,
                        const std::filesystem::path& out_dir) override {
    const auto start = std::chrono::steady_clock::now();
    const CheckedOptions options = check_nvrtc_options(solution.options);
    if (!options.error.empty()) return internal::rejected_result(options.error);
    LaunchPlan plan;
    try {
      plan = parse_plan(solution, ctx);
    } catch (const InputError& e) {
      return internal::rejected_result(e.what());
    }
    cuda_arch_number(ctx.arch);  // a virtual or malformed arch is a configuration error
    internal::write_file(out_dir / kCudaSourceName, solution.source);

    std::vector<std::string> args = {"--gpu-architecture=" + ctx.arch};
    if (!options.sets_std) args.push_back(kDefaultStd);
    args.insert(args.end(), kFixedFlags.begin(), kFixedFlags.end());
    for (const auto& d : include_dirs_) args.push_back("--include-path=" + d.string());
    args.insert(args.end(), options.args.begin(), options.args.end());
    NvrtcWorkerPool::Request request;
    request.source = solution.source;
    request.name = kCudaSourceName;
    request.args = args;
    for (const auto& k : plan.kernels) request.names.push_back(k.name);
    request.timeout_s = ctx.timeout_s;
    request.memory_limit_bytes = ctx.memory_limit_bytes;
    const NvrtcWorkerPool::Result compiled = workers_->compile(request);
    const std::string shown = internal::command_line([&] {
      std::vector<std::string> line = {"nvrtc"};
      line.insert(line.end(), args.begin(), args.end());
      return line;
    }());
    using Status = NvrtcWorkerPool::Result::Status;
    if (compiled.status != Status::kCompiled) {
      const std::string what = compiled.status == Status::kTimedOut      ? "time"
                               : compiled.status == Status::kOutOfMemory ? "memory"
                                                                         : compiled.detail;
      CompileResult r = internal::limit_result(ctx, "NVRTC", what, compiled.wall_ms, shown + compiled.log);
      r.artifact.mode = SolutionMode::kNvrtc;
      return r;
    }
    CompileResult r;
    r.log = shown + compiled.log;
    r.artifact.mode = SolutionMode::kNvrtc;
    if (compiled.nvrtc_result == NVRTC_SUCCESS) {
      const json resources = parse_ptxas_resource_usage(r.log);
      const std::string missing = lower_kernel_names(compiled, resources, &plan);
      if (missing.empty()) {
        internal::write_file(out_dir / kCubinName, compiled.cubin);
        r.ok = true;
        r.artifact.path = out_dir / kCubinName;
        r.artifact.launch = to_json(plan);
        r.artifact.resources = resources;
      } else {
        r.diagnostics = missing;
      }
    } else if (compiled.nvrtc_result != NVRTC_ERROR_COMPILATION) {
      // The options passed the allow-list, so anything but a compilation error is ours.
      throw SystemError("nvrtcCompileProgram: " + compiled.result_text + "\n" + r.log);
    }
    if (r.diagnostics.empty()) r.diagnostics = diagnostics_for(r.log, solution.source, plan, !r.ok);
    r.compile_ms = ms_since(start);
    return r;
  }

 private:
  static LaunchPlan parse_plan(const Solution& solution, const CompileContext& ctx) {
    if (solution.launch.is_null()) {
      throw InputError(solution.origin + ": mode \"nvrtc\" needs a \"launch\" plan (kernel name, grid, block, args)");
    }
    return parse_launch_plan(solution.launch, ctx.tensor_names, solution.origin, "/launch");
  }

  // NVRTC compiles each name expression in a pseudo-file "__nv_name_map"
  // ("#pragma nv_mangled_name scale_typo<float>"); its errors are reported as
  // errors of the launch plan, after those of the candidate's source.
  static std::string diagnostics_for(const std::string& log, const std::string& source, const LaunchPlan& plan,
                                     bool failed) {
    std::string filtered;
    std::istringstream in(log);
    std::string line;
    bool skipping = false;
    while (std::getline(in, line)) {
      if (line.rfind(kNameMapFile, 0) == 0) skipping = true;
      if (!skipping) filtered += line + "\n";
      if (line.empty()) skipping = false;
    }
    std::string plan_errors;
    std::set<size_t> reported;
    for (const Diagnostic& d : parse_diagnostics(log)) {
      if (d.file != kNameMapFile || d.severity != Diagnostic::Severity::kError) continue;
      const size_t at = d.quoted_line.find(kPragma);
      const std::string name = at == std::string::npos ? "" : d.quoted_line.substr(at + std::strlen(kPragma));
      for (size_t i = 0; i < plan.kernels.size(); ++i) {
        if (plan.kernels[i].name != name || !reported.insert(i).second) continue;
        plan_errors += "launch.kernels[" + std::to_string(i) + "].name \"" + name +
                       "\" is not a __global__ function (or template instantiation) of the source: " + d.message + "\n";
      }
    }
    const std::string source_errors =
        condense_diagnostics(filtered, kCudaSourceName, source, failed && plan_errors.empty());
    return source_errors + plan_errors;
  }

  static constexpr const char* kNameMapFile = "__nv_name_map";
  static constexpr const char* kPragma = "nv_mangled_name ";

  std::string version_;
  std::vector<std::filesystem::path> include_dirs_;
  std::unique_ptr<NvrtcWorkerPool> workers_;
};

}  // namespace

std::unique_ptr<Compiler> make_nvrtc_compiler() { return std::make_unique<NvrtcCompiler>(); }
bool have_nvrtc() { return true; }

}  // namespace kforge::env
