#include "nvcc_helper.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace kforge::testing {
namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

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
  std::string cmd = shell_quote(env_nvcc && *env_nvcc ? env_nvcc : KFORGE_TEST_NVCC) +
                    " -gencode=arch=compute_90a,code=sm_90a --resource-usage";
  cmd += kind == NvccOutput::kSharedObject ? " -shared -Xcompiler -fPIC" : " -cubin";
  for (const auto& f : extra_flags) cmd += " " + shell_quote(f);
  cmd += " -o " + shell_quote(b.output.string()) + " " + shell_quote(src.string());
  b.log = run_capture(cmd, &b.exit_code);
  return b;
}

std::string run_capture(const std::string& command, int* exit_code) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run: " + command);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace kforge::testing
