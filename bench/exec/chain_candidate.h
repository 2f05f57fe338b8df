// The candidate the exec benchmarks evaluate (bench_exec, judge_memory_bench):
// a fused elementwise chain as a C-ABI shared object, compiled with g++ once
// per run into the build tree.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "kforge/core/process.h"

namespace kforge::bench {

constexpr const char* kChainSource = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data; const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data; float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) { float v = x[i] * y[i] + z[i]; o[i] = v > 0.f ? v : 0.f; }
  return 0;
}
)";

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
