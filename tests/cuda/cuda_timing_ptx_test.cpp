// The PTX kernels of cuda_timing (the launch gate and the read flush) assemble
// with ptxas for the H200's architecture, so a typo in them is found without a
// GPU; what they do on a GPU is checked by every timed GPU test
// (timing.launch_gate, timing.cache_flush).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cuda_timing/launch_gate.h"
#include "cuda_timing/read_flush.h"
#include "kforge/core/process.h"
#include "kforge/core/remove_tree.h"
#include "kforge/env/compile/compilers.h"

namespace kforge {
namespace {

// Assembles `ptx` for sm_90a and returns ptxas's verbose output.
std::string assemble(const char* ptx, const std::string& name) {
  const std::filesystem::path nvcc = env::default_nvcc();
  EXPECT_FALSE(nvcc.empty()) << "no nvcc, so no ptxas next to it";
  if (nvcc.empty()) return "";
  const std::filesystem::path ptxas = nvcc.parent_path() / "ptxas";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kforge-" + name + "-ptx-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "k.ptx") << ptx;
  ProcessOptions options;
  options.timeout_s = 60;
  const ProcessResult r = run_process(
      {ptxas.string(), "-arch=sm_90a", "--verbose", (dir / "k.ptx").string(), "-o", (dir / "k.cubin").string()},
      options);
  EXPECT_TRUE(r.ok()) << r.output;
  std::error_code ec;
  EXPECT_GT(std::filesystem::file_size(dir / "k.cubin", ec), 0u);
  kforge::remove_tree(dir);
  return r.output;
}

TEST(LaunchGatePtxTest, AssemblesForSm90aWithItsEntryAndParameters) {
  EXPECT_NE(assemble(cuda_timing::launch_gate_ptx(), "gate").find("kforge_launch_gate"), std::string::npos);
}

TEST(ReadFlushPtxTest, AssemblesForSm90a) {
  EXPECT_NE(assemble(cuda_timing::read_flush_ptx(), "flush").find("kforge_read_flush"), std::string::npos);
}

}  // namespace
}  // namespace kforge
