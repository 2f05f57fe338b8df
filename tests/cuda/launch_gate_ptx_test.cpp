// The launch gate's PTX (cuda_timing/launch_gate.h) assembles with ptxas for
// the H200's architecture, so a typo in it is found without a GPU; what it
// does on a GPU is checked by every timed GPU test (timing.launch_gate).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cuda_timing/launch_gate.h"
#include "kforge/env/compile/compilers.h"
#include "kforge/env/compile/subprocess.h"

namespace kforge {
namespace {

TEST(LaunchGatePtxTest, AssemblesForSm90aWithItsEntryAndParameters) {
  const std::filesystem::path nvcc = env::default_nvcc();
  ASSERT_FALSE(nvcc.empty()) << "no nvcc, so no ptxas next to it";
  const std::filesystem::path ptxas = nvcc.parent_path() / "ptxas";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kforge-gate-ptx-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "gate.ptx") << cuda_timing::launch_gate_ptx();
  env::ProcessOptions options;
  options.timeout_s = 60;
  const env::ProcessResult r = env::run_process(
      {ptxas.string(), "-arch=sm_90a", "--verbose", (dir / "gate.ptx").string(), "-o", (dir / "gate.cubin").string()},
      options);
  EXPECT_TRUE(r.ok()) << r.output;
  EXPECT_NE(r.output.find("kforge_launch_gate"), std::string::npos) << r.output;
  EXPECT_GT(std::filesystem::file_size(dir / "gate.cubin"), 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kforge
