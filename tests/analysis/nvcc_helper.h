// Builds small CUDA sources with the real nvcc for the analysis tests: a
// shared object (what the cuda mode produces) or a CUBIN (what nvrtc mode
// produces), with the compiler's resource report captured.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kforge::testing {

struct NvccBuild {
  int exit_code = -1;
  std::filesystem::path output;  // the .so or .cubin
  std::string log;               // nvcc's stdout + stderr (ptxas info lines included)
};

enum class NvccOutput { kSharedObject, kCubin };

// Compiles `source` for sm_90a with --resource-usage into `dir`/`name`.{so,cubin}.
NvccBuild nvcc_build(const std::string& source, const std::filesystem::path& dir, const std::string& name,
                     NvccOutput kind, const std::vector<std::string>& extra_flags = {});

// Runs argv (argv[0] a path, no shell); its stdout and stderr, and the exit
// code in `*exit_code` (-1 when a signal ended it).
std::string run_capture(std::vector<std::string> argv, int* exit_code);

// A fresh empty directory under the system temp dir.
std::filesystem::path make_temp_dir(const std::string& prefix);

}  // namespace kforge::testing
