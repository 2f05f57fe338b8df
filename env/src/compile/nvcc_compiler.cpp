// Modes cuda and torch_ext: CUDA C++ built by nvcc into a shared object that
// exports kf_forward, with ptxas' per-kernel resource usage recorded. A
// torch_ext solution is first turned into such a file (torch_ext_source.h)
// and built against the torch shim's headers (docs/torch-ext.md).
#include <algorithm>
#include <mutex>

#include "build_support.h"
#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"
#include "kforge/env/compile/compilers.h"
#include "kforge/env/compile/options.h"
#include "kforge/env/compile/resource_usage.h"
#include "kforge/env/compile/torch_ext_source.h"

namespace kforge::env {
namespace {

// -z separate-code: only code in the executable segment. The ELF inspector
// scans every executable segment byte by byte for system-call instructions
// (raw_syscall); a linker that puts the symbol tables and .rodata there too
// (the H200 machine's toolchain did) let their arbitrary bytes read as one,
// and honest kernels were rejected.
const std::vector<std::string> kFixedFlags = {"-shared",  "-Xcompiler",       "-fPIC",           "-cudart", "shared",
                                              "-Xlinker", "-z,separate-code", "--resource-usage"};
// Left out when the solution gives its own (nvcc warns about redefinitions).
const char* kDefaultStd = "-std=c++17";
const char* kDefaultOpt = "-O3";

struct Library {
  std::string name;  // as in TaskSpec::libraries
  std::string flag;
};

const std::vector<Library>& known_libraries() {
  static const std::vector<Library> kLibs = {{"cublas", "-lcublas"}, {"cublasLt", "-lcublasLt"}, {"cudnn", "-lcudnn"}};
  return kLibs;
}

// Allowed libraries the source mentions. Linking only those keeps a machine
// without cuDNN able to build every candidate that does not use it.
std::vector<std::string> library_flags(const std::vector<std::string>& allowed, const std::string& source) {
  std::vector<std::string> flags;
  for (const auto& name : allowed) {
    auto lib = std::find_if(known_libraries().begin(), known_libraries().end(),
                            [&](const Library& l) { return l.name == name; });
    if (lib == known_libraries().end()) {
      throw SystemError("CompileContext::libraries names \"" + name + "\"; known: cublas, cublasLt, cudnn");
    }
    if (source.find(lib->name) != std::string::npos) flags.push_back(lib->flag);
  }
  return flags;
}

std::string gencode(const std::string& arch) {
  const std::string n = cuda_arch_number(arch);
  return "-gencode=arch=compute_" + n + ",code=sm_" + n;
}

class NvccCompiler : public Compiler {
 public:
  NvccCompiler(std::filesystem::path nvcc, SolutionMode mode) : nvcc_(std::move(nvcc)), mode_(mode) {}

  SolutionMode mode() const override { return mode_; }

  std::string identity(const CompileContext& ctx) const override {
    std::string flags = std::string(kDefaultStd) + " " + kDefaultOpt;
    for (const auto& f : kFixedFlags) flags += " " + f;
    std::vector<std::string> libs = ctx.libraries;
    std::sort(libs.begin(), libs.end());
    std::string lib_text;
    for (const auto& l : libs) lib_text += l + ",";
    const std::string shim = mode_ == SolutionMode::kTorchExt
                                 ? ";torch_shim=" + internal::directory_hash(internal::resolve_torch_ext_include_dir())
                                 : "";
    return solution_mode_name(mode_) + ";nvcc=" + nvcc_.string() + ";version=" + versions() + ";flags=" + flags + " " +
           gencode(ctx.arch) + ";libraries=" + lib_text +
           ";abi=" + internal::abi_header_hash(internal::resolve_abi_include_dir(ctx)) + shim;
  }

  std::string precheck(const Solution& solution, const CompileContext& ctx) const override {
    std::string error = check_nvcc_options(solution.options).error;
    if (error.empty() && mode_ == SolutionMode::kTorchExt) error = prepare_torch_ext_source(solution.source).error;
    return error;
  }

  CompileResult compile(const Solution& solution, const CompileContext& ctx,
                        const std::filesystem::path& out_dir) override {
    const CheckedOptions options = check_nvcc_options(solution.options);
    if (!options.error.empty()) return internal::rejected_result(options.error);
    if (nvcc_.empty()) throw SystemError("nvcc not found (set KFORGE_NVCC or put the CUDA toolkit on PATH)");
    const std::filesystem::path abi = internal::resolve_abi_include_dir(ctx);
    std::string file_name = kCudaSourceName;
    std::vector<std::string> includes = {"-I" + abi.string()};
    if (mode_ == SolutionMode::kTorchExt) {
      const TorchExtSource prepared = prepare_torch_ext_source(solution.source);
      if (!prepared.error.empty()) return internal::rejected_result(prepared.error);
      internal::write_file(out_dir / kCudaSourceName, prepared.text);
      file_name = prepared.file_name;
      // The shim first: its torch/extension.h is the one the candidate gets.
      includes.insert(includes.begin(), "-I" + internal::resolve_torch_ext_include_dir().string());
    } else {
      internal::write_file(out_dir / kCudaSourceName, solution.source);
    }

    std::vector<std::string> argv = {nvcc_.string()};
    argv.insert(argv.end(), kFixedFlags.begin(), kFixedFlags.end());
    if (!options.sets_std) argv.push_back(kDefaultStd);
    if (!options.sets_opt_level) argv.push_back(kDefaultOpt);
    argv.push_back(gencode(ctx.arch));
    argv.insert(argv.end(), includes.begin(), includes.end());
    argv.insert(argv.end(), options.args.begin(), options.args.end());
    argv.insert(argv.end(), {kCudaSourceName, "-o", kSharedObjectName});
    const std::vector<std::string> libs = library_flags(ctx.libraries, solution.source);
    if (!libs.empty()) {
      argv.insert(argv.end(), {"-Xlinker", "--as-needed"});
      argv.insert(argv.end(), libs.begin(), libs.end());
    }

    const ProcessResult process = run_process(argv, internal::compiler_process_options(out_dir, ctx));
    kforge::remove_tree(out_dir / "tmp");
    CompileResult r =
        internal::result_from_process(process, "nvcc", file_name, solution.source, out_dir / kSharedObjectName, ctx);
    r.log = internal::command_line(argv) + r.log;
    r.artifact.mode = mode_;
    r.artifact.libraries = ctx.libraries;
    if (r.ok) {
      r.artifact.path = out_dir / kSharedObjectName;
      r.artifact.resources = parse_ptxas_resource_usage(process.output);
    }
    return r;
  }

 private:
  // nvcc's release and the host compiler it drives (g++ on PATH) both decide
  // the output.
  const std::string& versions() const {
    std::call_once(version_once_, [this] {
      if (nvcc_.empty()) throw SystemError("nvcc not found (set KFORGE_NVCC or put the CUDA toolkit on PATH)");
      const std::filesystem::path host = find_on_path("g++");
      versions_ = internal::tool_version(nvcc_, "release") + "; host " +
                  (host.empty() ? std::string("none") : internal::tool_version(host));
    });
    return versions_;
  }

  std::filesystem::path nvcc_;
  SolutionMode mode_;
  mutable std::once_flag version_once_;
  mutable std::string versions_;
};

}  // namespace

std::unique_ptr<Compiler> make_nvcc_compiler(std::filesystem::path nvcc) {
  return std::make_unique<NvccCompiler>(nvcc.empty() ? default_nvcc() : std::move(nvcc), SolutionMode::kCuda);
}

std::unique_ptr<Compiler> make_torch_ext_compiler(std::filesystem::path nvcc) {
  return std::make_unique<NvccCompiler>(nvcc.empty() ? default_nvcc() : std::move(nvcc), SolutionMode::kTorchExt);
}

}  // namespace kforge::env
