// Allow-lists for the compiler flags a solution may add (Solution::options).
//
// Flags are untrusted: a policy rewarded for speed will try -fopenmp, extra
// libraries, include paths to harness headers, compiler plugins or response
// files. Only flags that change code generation of the candidate's own source
// pass; anything else is refused before a compiler runs, with a message that
// names the flag, says why when there is a specific reason, and lists what is
// allowed.
#pragma once

#include <string>
#include <vector>

namespace kforge::env {

struct CheckedOptions {
  std::vector<std::string> args;  // what to pass to the compiler, normalized
  std::string error;              // empty when every flag is allowed
  bool sets_std = false;          // a -std= was given, so the default one is left out
  bool sets_opt_level = false;    // a -O<n> was given (nvcc warns about two, so ours is left out)
};

// Each element of `options` may hold several flags separated by spaces
// ("-Xptxas -O3"); a flag that takes a value may have it in the next element.
CheckedOptions check_host_options(const std::vector<std::string>& options);   // g++, mode cpp
CheckedOptions check_nvcc_options(const std::vector<std::string>& options);   // mode cuda
CheckedOptions check_nvrtc_options(const std::vector<std::string>& options);  // mode nvrtc

}  // namespace kforge::env
