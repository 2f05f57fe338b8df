// A candidate solution: source code plus how to build and launch it
// (docs/architecture.md#solutions).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kforge/core/document.h"

namespace kforge {

enum class SolutionMode {
  kCuda,      // CUDA C++ built by nvcc into a shared object exporting kf_forward
  kNvrtc,     // device code built by NVRTC to a CUBIN, launched by `launch`
  kTorchExt,  // KernelBench load_inline-style torch extension (compatibility)
  kCpp,       // host C++ for the CPU backend, kf_forward with host pointers
};

const std::string& solution_mode_name(SolutionMode mode);
const std::vector<std::string>& solution_mode_names();
SolutionMode parse_solution_mode(const Field& field);

struct Solution {
  SolutionMode mode = SolutionMode::kCuda;
  std::string source;
  // Extra compiler flags; each backend checks them against its allow-list.
  std::vector<std::string> options;
  // nvrtc launch plan (grammar in env/include/kforge/env/cuda/launch_plan.h);
  // null for other modes.
  json launch;
  // Where the solution came from, for error messages.
  std::string origin = "<solution>";
};

// From a solution document: {"mode", "source" | "source_file", "options", "launch"}.
// `source_file` is resolved relative to the document's directory.
Solution parse_solution(const Document& doc);
// From a path: .json/.yaml are solution documents; .py is a KernelBench
// load_inline solution (mode torch_ext); any other file is raw source in
// `default_mode`.
Solution load_solution(const std::filesystem::path& path, SolutionMode default_mode);
json to_json(const Solution& solution);

}  // namespace kforge
