// The concrete compilers behind CompileService, and where they find their
// tools. Each is usable on its own (tests, benchmarks, the CLI); the service
// adds caching and the pool.
//
// Locations, first match wins (docs/compile.md):
//   host compiler   $KFORGE_CXX, else g++ on $PATH
//   nvcc            $KFORGE_NVCC, else the toolkit found at build time, else nvcc on $PATH
//   ABI header dir  CompileContext::abi_include_dir, $KFORGE_ABI_INCLUDE_DIR, else the
//                   directory the build staged with only kforge/kernel_abi.h in it
//   torch shim    $KFORGE_TORCH_EXT_INCLUDE_DIR, else the directory the build staged the
//                 shim's headers in (torch/extension.h, kforge/torch_ext_*.h)
//   CUDA headers    $KFORGE_CUDA_INCLUDE_DIR (':'-separated), else the toolkit's include
//                   directories found at build time (NVRTC's --include-path)
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kforge/env/compiler.h"

namespace kforge::env {

// Mode cpp: `g++ -std=c++17 -O3 -shared -fPIC -I<abi>` into candidate.so.
std::unique_ptr<Compiler> make_host_compiler(std::filesystem::path cxx = {});
// Mode cuda: nvcc into candidate.so with --resource-usage parsed per kernel.
std::unique_ptr<Compiler> make_nvcc_compiler(std::filesystem::path nvcc = {});
// Mode torch_ext: a KernelBench load_inline solution built by nvcc against
// the torch shim into candidate.so (docs/torch-ext.md).
std::unique_ptr<Compiler> make_torch_ext_compiler(std::filesystem::path nvcc = {});
// Mode nvrtc: NVRTC in-process into kernel.cubin. Throws SystemError when
// this build has no CUDA toolkit.
std::unique_ptr<Compiler> make_nvrtc_compiler();
// Whether this build links NVRTC (the CUDA toolkit was found at configure time).
bool have_nvrtc();

std::filesystem::path default_abi_include_dir();
// The torch shim's headers (torch/extension.h and friends) for torch_ext.
std::filesystem::path default_torch_ext_include_dir();
std::vector<std::filesystem::path> default_cuda_include_dirs();
std::filesystem::path default_nvcc();
std::filesystem::path default_host_compiler();

// "sm_90a" -> "90a"; throws SystemError for anything that is not sm_<digits>[a|f].
std::string cuda_arch_number(const std::string& arch);

// File names inside an artifact directory.
inline constexpr const char* kCppSourceName = "candidate.cpp";
inline constexpr const char* kCudaSourceName = "candidate.cu";
inline constexpr const char* kSharedObjectName = "candidate.so";
inline constexpr const char* kCubinName = "kernel.cubin";

}  // namespace kforge::env
