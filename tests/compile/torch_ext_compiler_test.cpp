// torch_ext with the real nvcc (no GPU needed): a KernelBench load_inline
// file builds against the torch shim into a candidate the CUDA symbol policy
// accepts; errors point at lines of the .py; PyTorch's own ops are absent;
// an entry with a non-tensor parameter is refused with the reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "judge/elf_inspector.h"
#include "judge/symbol_policy.h"
#include "kforge/core/solution.h"
#include "kforge/env/compile/compilers.h"
#include "test_support.h"

namespace kforge::env {
namespace {

using testing::TempDir;

Solution torch_ext(const std::string& source) {
  Solution s;
  s.mode = SolutionMode::kTorchExt;
  s.source = source;
  return s;
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The bundled example, as a policy trained on KernelBench writes it.
TEST(TorchExtCompilerTest, KernelBenchFileBuildsAndPassesTheCudaSymbolPolicy) {
  const auto file =
      std::filesystem::path(KFORGE_SOURCE_DIR) / "examples" / "affine_relu6" / "cuda" / "torch_ext_fast.py";
  const Solution s = load_solution(file, SolutionMode::kCuda);
  ASSERT_EQ(s.mode, SolutionMode::kTorchExt);
  TempDir dir;
  const CompileResult r = make_torch_ext_compiler()->compile(s, {}, dir.path());
  ASSERT_TRUE(r.ok) << r.diagnostics << "\n" << r.log;
  EXPECT_EQ(r.artifact.mode, SolutionMode::kTorchExt);
  EXPECT_TRUE(testing::exports_function(r.artifact.path, "kf_forward"));
  // ptxas' resource usage names the candidate's kernel (the analysis tools use it).
  bool found = false;
  for (const auto& [signature, res] : r.artifact.resources.items()) {
    found = found || signature.find("affine_relu6_kernel") != std::string::npos;
  }
  EXPECT_TRUE(found) << r.artifact.resources.dump(1);
  // The launch without a stream went onto the harness's.
  EXPECT_NE(read(dir.path() / kCudaSourceName).find("::kforge::torch_ext::current_stream()>>>"), std::string::npos);

  const judge::ElfInspection inspection =
      judge::inspect_candidate(r.artifact.path, judge::SymbolPolicy::for_backend("cuda"));
  std::string why;
  for (const auto& v : inspection.violations) why += v.check + ": " + v.detail + "\n";
  EXPECT_TRUE(inspection.accepted) << why;
}

TEST(TorchExtCompilerTest, ErrorsPointAtTheLinesOfThePythonFileAndTorchOpsAreAbsent) {
  // Line 7 of the file calls torch::matmul: PyTorch's kernels are not here.
  const std::string py = R"PY(import torch
from torch.utils.cpp_extension import load_inline

src = """
#include <torch/extension.h>
torch::Tensor mm(torch::Tensor a, torch::Tensor b) {
    return torch::matmul(a, b);
}
"""

mm = load_inline(name="mm", cpp_sources="", cuda_sources=src, functions=["mm"])
)PY";
  TempDir dir;
  const CompileResult r = make_torch_ext_compiler()->compile(torch_ext(py), {}, dir.path());
  ASSERT_FALSE(r.ok);
  EXPECT_TRUE(r.system_error.empty()) << r.system_error;
  EXPECT_NE(r.diagnostics.find("candidate.py:7:"), std::string::npos) << r.diagnostics << "\n" << r.log;
  EXPECT_NE(r.diagnostics.find("matmul"), std::string::npos) << r.diagnostics;
  EXPECT_NE(r.diagnostics.find("return torch::matmul(a, b);"), std::string::npos) << r.diagnostics;
}

TEST(TorchExtCompilerTest, NonTensorParameterIsRefusedWithTheReason) {
  const std::string cu = R"(#include <torch/extension.h>
torch::Tensor scale(torch::Tensor x, double alpha) {
  auto y = torch::empty_like(x);
  return y;
}
)";
  TempDir dir;
  const CompileResult r = make_torch_ext_compiler()->compile(torch_ext(cu), {}, dir.path());
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.diagnostics.find("every parameter of the entry function must be a torch::Tensor"), std::string::npos)
      << r.diagnostics << "\n"
      << r.log;
  // A problem found before nvcc runs is a rejection that names the fix.
  EXPECT_NE(make_torch_ext_compiler()
                ->precheck(torch_ext("__global__ void k() {}"), {})
                .find("no function returning torch::Tensor"),
            std::string::npos);
}

}  // namespace
}  // namespace kforge::env
