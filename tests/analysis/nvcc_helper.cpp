#include "nvcc_helper.h"

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "kforge/core/process.h"

namespace kforge::testing {

std::filesystem::path make_temp_dir(const std::string& prefix) {
  std::string templ = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + templ);
  return templ;
}

NvccBuild nvcc_build(const std::string& source, const std::filesystem::path& dir, const std::string& name,
                     NvccOutput kind, const std::vector<std::string>& extra_flags) {
  const auto src = dir / (name + ".cu");
  {
    std::ofstream out(src);
    out << source;
  }
  NvccBuild b;
  b.output = dir / (name + (kind == NvccOutput::kSharedObject ? ".so" : ".cubin"));
  // The GPU host may keep nvcc elsewhere than the build host.
  const char* env_nvcc = std::getenv("KFORGE_NVCC");  // NOLINT(concurrency-mt-unsafe): tests never setenv
  std::vector<std::string> argv = {env_nvcc && *env_nvcc ? env_nvcc : KFORGE_TEST_NVCC,
                                   "-gencode=arch=compute_90a,code=sm_90a", "--resource-usage"};
  if (kind == NvccOutput::kSharedObject) {
    argv.insert(argv.end(), {"-shared", "-Xcompiler", "-fPIC"});
  } else {
    argv.push_back("-cubin");
  }
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  argv.insert(argv.end(), {"-o", b.output.string(), src.string()});
  b.log = run_capture(argv, &b.exit_code);
  return b;
}

std::string run_capture(std::vector<std::string> argv, int* exit_code) {
  // KFORGE_NVCC may name a program on PATH rather than a path.
  if (const std::filesystem::path found = find_on_path(argv.at(0)); !found.empty()) argv[0] = found.string();
  ProcessOptions options;
  options.timeout_s = 600;                       // nvcc on a loaded machine; ctest's own limit is the real bound
  options.max_output_bytes = size_t{256} << 20;  // a whole SASS listing
  const ProcessResult r = run_process(argv, options);
  *exit_code = r.exit_code;
  return r.output;
}

}  // namespace kforge::testing
