// Where the compilers and headers are, decided once per process. Build-time
// defaults come from CMake (see env/src/compile/CMakeLists.txt); environment
// variables override them so an installed or relocated build still works.
#include <cstdlib>
#include <regex>

#include "kforge/core/error.h"
#include "kforge/core/process.h"
#include "kforge/env/compile/compilers.h"

namespace kforge::env {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::vector<std::filesystem::path> split_dirs(const std::string& text) {
  const char sep = ':';
  std::vector<std::filesystem::path> dirs;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find(sep, start);
    const std::string dir = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty()) dirs.emplace_back(dir);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return dirs;
}

}  // namespace

std::filesystem::path default_abi_include_dir() {
  const std::string from_env = env_or_empty("KFORGE_ABI_INCLUDE_DIR");
  if (!from_env.empty()) return from_env;
  return KFORGE_ABI_INCLUDE_DIR_DEFAULT;
}

std::filesystem::path default_torch_ext_include_dir() {
  const std::string from_env = env_or_empty("KFORGE_TORCH_EXT_INCLUDE_DIR");
  if (!from_env.empty()) return from_env;
  return KFORGE_TORCH_EXT_INCLUDE_DIR_DEFAULT;
}

std::vector<std::filesystem::path> default_cuda_include_dirs() {
  const std::string from_env = env_or_empty("KFORGE_CUDA_INCLUDE_DIR");
  std::vector<std::filesystem::path> dirs = split_dirs(from_env.empty() ? KFORGE_CUDA_INCLUDE_DIRS_DEFAULT : from_env);
  // CUDA 13 keeps libcu++/CUB/Thrust under include/cccl; nvcc adds it by
  // itself, NVRTC needs it spelled out.
  const size_t n = dirs.size();
  for (size_t i = 0; i < n; ++i) {
    if (std::filesystem::is_directory(dirs[i] / "cccl")) dirs.push_back(dirs[i] / "cccl");
  }
  return dirs;
}

std::filesystem::path default_nvcc() {
  const std::string from_env = env_or_empty("KFORGE_NVCC");
  if (!from_env.empty()) return find_on_path(from_env);
  const std::filesystem::path built = KFORGE_NVCC_DEFAULT;
  if (!built.empty() && std::filesystem::exists(built)) return built;
  return find_on_path("nvcc");
}

std::filesystem::path default_host_compiler() {
  const std::string from_env = env_or_empty("KFORGE_CXX");
  return find_on_path(from_env.empty() ? "g++" : from_env);
}

std::string cuda_arch_number(const std::string& arch) {
  static const std::regex kArch(R"(sm_(\d{2,3}[af]?))");
  std::smatch m;
  if (!std::regex_match(arch, m, kArch)) {
    throw SystemError("CompileContext::arch \"" + arch + "\" is not a real CUDA architecture such as sm_90a or sm_80");
  }
  return m[1].str();
}

}  // namespace kforge::env
