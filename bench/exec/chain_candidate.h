// The candidate the exec benchmarks evaluate (bench_exec, judge_memory_bench):
// a fused elementwise chain as a C-ABI shared object, compiled with g++ once
// per run into the build tree.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "../../tests/exec/candidates.h"
#include "kforge/core/process.h"

namespace kforge::bench {

// The executor tests' correct chain (out = relu(x * y + z)), so that the
// benchmarks time what those tests check.
constexpr const char* kChainSource = testing::candidates::kChainCorrect;

// Writes the chain's source as <name>.cpp and compiles <name>.so beside it;
// aborts the benchmark when g++ fails.
inline std::filesystem::path build_chain_candidate(const std::string& name) {
  const auto dir = std::filesystem::path(KFORGE_BINARY_DIR) / "bench" / "exec";
  std::filesystem::create_directories(dir);
  const auto src = dir / (name + ".cpp"), so = dir / (name + ".so");
  std::ofstream(src) << kChainSource;
  const ProcessResult r = run_process({find_on_path("g++").string(), "-std=c++17", "-O3", "-shared", "-fPIC",
                                       "-I" KFORGE_SOURCE_DIR "/core/include", "-o", so.string(), src.string()});
  if (!r.ok()) {
    std::fprintf(stderr, "g++ failed:\n%s\n", r.output.c_str());
    std::abort();
  }
  return so;
}

}  // namespace kforge::bench
