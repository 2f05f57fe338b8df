// Mode cpp (the CPU backend): the candidate's kf_forward built by the host C++
// compiler into a shared object the runner loads.
#include <mutex>

#include "build_support.h"
#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"
#include "kforge/env/compile/compilers.h"
#include "kforge/env/compile/options.h"

namespace kforge::env {
namespace {

// -z separate-code: only code is executable, so the ELF inspector's
// system-call scan reads code, not symbol tables (nvcc_compiler.cpp).
const std::vector<std::string> kFixedFlags = {"-O3", "-shared", "-fPIC", "-pipe", "-Wl,-z,separate-code"};
const char* kDefaultStd = "-std=c++17";

class HostCompiler : public Compiler {
 public:
  explicit HostCompiler(std::filesystem::path cxx) : cxx_(std::move(cxx)) {}

  SolutionMode mode() const override { return SolutionMode::kCpp; }

  std::string identity(const CompileContext& ctx) const override {
    std::string flags = kDefaultStd;
    for (const auto& f : kFixedFlags) flags += " " + f;
    return "cpp;cxx=" + cxx_.string() + ";version=" + version() + ";flags=" + flags +
           ";abi=" + internal::abi_header_hash(internal::resolve_abi_include_dir(ctx));
  }

  std::string precheck(const Solution& solution, const CompileContext& ctx) const override {
    return check_host_options(solution.options).error;
  }

  CompileResult compile(const Solution& solution, const CompileContext& ctx,
                        const std::filesystem::path& out_dir) override {
    const CheckedOptions options = check_host_options(solution.options);
    if (!options.error.empty()) return internal::rejected_result(options.error);
    if (cxx_.empty()) throw SystemError("no host C++ compiler: g++ is not on PATH (set KFORGE_CXX)");
    const std::filesystem::path abi = internal::resolve_abi_include_dir(ctx);
    internal::write_file(out_dir / kCppSourceName, solution.source);

    std::vector<std::string> argv = {cxx_.string()};
    if (!options.sets_std) argv.push_back(kDefaultStd);
    argv.insert(argv.end(), kFixedFlags.begin(), kFixedFlags.end());
    argv.push_back("-I" + abi.string());
    // After the fixed flags, so that e.g. -O2 wins over -O3.
    argv.insert(argv.end(), options.args.begin(), options.args.end());
    argv.insert(argv.end(), {kCppSourceName, "-o", kSharedObjectName});

    const ProcessResult process = run_process(argv, internal::compiler_process_options(out_dir, ctx));
    kforge::remove_tree(out_dir / "tmp");
    CompileResult r = internal::result_from_process(process, "g++", kCppSourceName, solution.source,
                                                    out_dir / kSharedObjectName, ctx);
    r.log = internal::command_line(argv) + r.log;
    r.artifact.mode = SolutionMode::kCpp;
    if (r.ok) r.artifact.path = out_dir / kSharedObjectName;
    return r;
  }

 private:
  const std::string& version() const {
    std::call_once(version_once_, [this] {
      if (cxx_.empty()) throw SystemError("no host C++ compiler: g++ is not on PATH (set KFORGE_CXX)");
      version_ = internal::tool_version(cxx_);
    });
    return version_;
  }

  std::filesystem::path cxx_;
  mutable std::once_flag version_once_;
  mutable std::string version_;
};

}  // namespace

std::unique_ptr<Compiler> make_host_compiler(std::filesystem::path cxx) {
  return std::make_unique<HostCompiler>(cxx.empty() ? default_host_compiler() : std::move(cxx));
}

}  // namespace kforge::env
