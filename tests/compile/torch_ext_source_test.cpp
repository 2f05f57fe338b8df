// torch_ext source preparation: reading a KernelBench Python file, choosing
// the entry, giving stream-less launches the harness's stream, and the
// errors that name the fix. Pure text work; the nvcc builds of the result
// are in cuda_compilers_test.cpp.
#include "kforge/env/compile/torch_ext_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace kforge::env {
namespace {

const char* kStream = "S";

std::string launches(const std::string& cuda, int* count = nullptr) {
  return give_launches_the_stream(cuda, kStream, count);
}

TEST(TorchExtLaunchTest, StreamlessLaunchesGetTheHarnessStream) {
  int n = 0;
  EXPECT_EQ(launches("k<<<g, b>>>(x);", &n), "k<<<g, b, 0, S>>>(x);");
  EXPECT_EQ(n, 1);
  EXPECT_EQ(launches("k<<<g, b, smem>>>(x);", &n), "k<<<g, b, smem, S>>>(x);");
  EXPECT_EQ(n, 1);
  // An explicit default stream means torch's current stream in KernelBench.
  EXPECT_EQ(launches("k<<<g, b, 0, 0>>>(x);", &n), "k<<<g, b, 0, S>>>(x);");
  EXPECT_EQ(launches("k<<<g, b, 0, nullptr>>>(x);", &n), "k<<<g, b, 0, S>>>(x);");
  EXPECT_EQ(n, 1);
  // A stream the candidate chose stays: kernel attribution judges it.
  EXPECT_EQ(launches("k<<<g, b, 0, at::cuda::getCurrentCUDAStream()>>>(x);", &n),
            "k<<<g, b, 0, at::cuda::getCurrentCUDAStream()>>>(x);");
  EXPECT_EQ(n, 0);
  EXPECT_EQ(launches("k<<<g, b, 0, mine>>>(x);", &n), "k<<<g, b, 0, mine>>>(x);");
  EXPECT_EQ(n, 0);
}

TEST(TorchExtLaunchTest, NestedCommasTemplatesAndLiteralsAreNotArguments) {
  int n = 0;
  EXPECT_EQ(launches("k<T, 4><<<dim3(a, b), f(c, d)>>>(x, y);", &n), "k<T, 4><<<dim3(a, b), f(c, d), 0, S>>>(x, y);");
  EXPECT_EQ(n, 1);
  // Inside comments and strings nothing changes.
  const std::string quiet = "// k<<<g, b>>>(x);\n/* k<<<g, b>>> */ const char* s = \"<<<g, b>>>\";\n";
  EXPECT_EQ(launches(quiet, &n), quiet);
  EXPECT_EQ(n, 0);
}

TEST(TorchExtLaunchTest, LineBreaksInsideALaunchAreKept) {
  const std::string in = "k<<<grid,\n    block>>>(x,\n  y);\nnext();";
  const std::string out = launches(in);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), std::count(in.begin(), in.end(), '\n'));
  const std::string in4 = "k<<<g, b, 0,\n  0>>>(x);";
  const std::string out4 = launches(in4);
  EXPECT_EQ(std::count(out4.begin(), out4.end(), '\n'), 1) << out4;
}

const char* kKernelBenchFile = R"PY(import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# a comment with "quotes" and load_inline( in it
add_source = """
#include <torch/extension.h>

__global__ void add_kernel(const float* a, const float* b, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) out[idx] = a[idx] + b[idx];
}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = torch::zeros_like(a);
    int size = a.numel();
    add_kernel<<<(size + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), size);
    return out;
}
"""

add_cpp_source = "torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);"

add = load_inline(
    name="add",
    cpp_sources=add_cpp_source,
    cuda_sources=add_source,
    functions=["add_cuda"],
    verbose=True,
    extra_cflags=[""],
)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.add = add

    def forward(self, a, b):
        return self.add.add_cuda(a, b)
)PY";

TEST(TorchExtSourceTest, ReadsTheKernelBenchPythonFile) {
  const TorchExtSource s = prepare_torch_ext_source(kKernelBenchFile);
  ASSERT_EQ(s.error, "");
  EXPECT_EQ(s.file_name, "candidate.py");
  EXPECT_EQ(s.entry, "add_cuda");
  EXPECT_EQ(s.rewritten_launches, 1);
  // The CUDA string starts right after the quotes on line 6 of the file.
  EXPECT_NE(s.text.find("#line 6 \"candidate.py\"\n\n#include <torch/extension.h>"), std::string::npos) << s.text;
  // cpp_sources comes after it, from line 22.
  EXPECT_NE(s.text.find("#line 22 \"candidate.py\"\ntorch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);"),
            std::string::npos)
      << s.text;
  EXPECT_NE(s.text.find("<<<(size + 255) / 256, 256, 0, ::kforge::torch_ext::current_stream()>>>"), std::string::npos)
      << s.text;
  EXPECT_NE(s.text.find("KFORGE_TORCH_EXT_ENTRY(add_cuda)"), std::string::npos);
  // Python text never reaches the compiler.
  EXPECT_EQ(s.text.find("import torch"), std::string::npos);
  EXPECT_EQ(s.text.find("class ModelNew"), std::string::npos);
}

TEST(TorchExtSourceTest, LiteralsListsAndEscapes) {
  const std::string py =
      "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
      "m = load_inline(name='m', cpp_sources=['int f();'], "
      "cuda_sources=[r'''torch::Tensor f(torch::Tensor x) { return x; } // \\n''', "
      "'\\nint g() { return 1; }\\n'], functions=['f'])\n";
  const TorchExtSource s = prepare_torch_ext_source(py);
  ASSERT_EQ(s.error, "");
  EXPECT_EQ(s.entry, "f");
  // The raw string keeps its backslash; the plain one has real newlines.
  EXPECT_NE(s.text.find("// \\n"), std::string::npos) << s.text;
  EXPECT_NE(s.text.find("\nint g() { return 1; }\n"), std::string::npos) << s.text;
  EXPECT_NE(s.text.find("int f();"), std::string::npos) << s.text;
}

TEST(TorchExtSourceTest, SeveralFunctionsPickTheOneForwardCalls) {
  std::string py = kKernelBenchFile;
  py.replace(py.find("functions=[\"add_cuda\"]"), 22, "functions=[\"add_cuda\", \"helper\"]");
  TorchExtSource s = prepare_torch_ext_source(py);
  ASSERT_EQ(s.error, "");
  EXPECT_EQ(s.entry, "add_cuda");
  // forward calling neither (or both) cannot choose.
  py.replace(py.find("self.add.add_cuda(a, b)"), 23, "a + b");
  s = prepare_torch_ext_source(py);
  EXPECT_NE(s.error.find("lists 2 functions and ModelNew.forward calls 0 of them"), std::string::npos) << s.error;
}

TEST(TorchExtSourceTest, ProblemsInThePythonFileAreNamed) {
  const std::string head = "import torch\nfrom torch.utils.cpp_extension import load_inline\n";
  EXPECT_NE(prepare_torch_ext_source(head + "m = load_inline(name='m', cpp_sources='', functions=['f'])\n")
                .error.find("no cuda_sources"),
            std::string::npos);
  EXPECT_NE(prepare_torch_ext_source(head + "m = load_inline(name='m', cuda_sources=src, functions=['f'])\n")
                .error.find("cuda_sources names \"src\", but no"),
            std::string::npos);
  EXPECT_NE(prepare_torch_ext_source(head + "src = f\"\"\"{x}\"\"\"\nm = load_inline(cuda_sources=src)\n")
                .error.find("f-strings cannot be read"),
            std::string::npos);
  EXPECT_NE(prepare_torch_ext_source(head + "m = load_inline(name='m', cuda_sources='int x;')\n")
                .error.find("needs functions=[\"<entry>\"]"),
            std::string::npos);
  EXPECT_NE(prepare_torch_ext_source(head + "m = load_inline(cuda_sources=\"\"\"int x;\n")
                .error.find("line 3: unterminated string literal"),
            std::string::npos);
}

TEST(TorchExtSourceTest, BareCudaSourceUsesItsOneTensorFunction) {
  const std::string cu =
      "#include <torch/extension.h>\n__global__ void k(float* y) {}\n"
      "static int helper(int a) { return a; }\n"
      "torch::Tensor run(torch::Tensor x,\n                  torch::Tensor w) {\n"
      "  auto y = torch::empty_like(x);\n  k<<<1, 32>>>(y.data_ptr<float>());\n  return y;\n}\n";
  TorchExtSource s = prepare_torch_ext_source(cu);
  ASSERT_EQ(s.error, "");
  EXPECT_EQ(s.file_name, "candidate.cu");
  EXPECT_EQ(s.entry, "run");
  // No line moves: the candidate's line 7 is still line 7.
  EXPECT_EQ(s.text.substr(0, s.text.find("\n#line 1 \"kforge_torch_ext_entry\"")),
            give_launches_the_stream(cu, "::kforge::torch_ext::current_stream()"));

  const std::string two = cu + "std::vector<torch::Tensor> other(torch::Tensor x) { return {x}; }\n";
  s = prepare_torch_ext_source(two);
  EXPECT_NE(s.error.find("several functions return torch::Tensor (other, run)"), std::string::npos) << s.error;
  EXPECT_NE(prepare_torch_ext_source("__global__ void k() {}\n").error.find("no function returning torch::Tensor"),
            std::string::npos);
}

// The reader once used std::regex, whose matcher recursed once per
// character; a long run of identifier characters in a parameter list
// overflowed the stack (SIGSEGV on the H200).
TEST(TorchExtSourceTest, AVeryLongNameIsACompileErrorThatSaysWhatIsWrong) {
  const std::string name(200000, 'a');
  for (const std::string& src :
       {"torch::Tensor forward(torch::Tensor " + name + ") { return " + name + "; }\n",
        "torch::Tensor forward(" + name + "\n",
        "import torch\nfrom torch.utils.cpp_extension import load_inline\nsrc = \"\"\"" + name +
            "\"\"\"\nm = load_inline(name='x', cpp_sources='', cuda_sources=src, functions=['f'])\n"}) {
    const TorchExtSource s = prepare_torch_ext_source(src);
    EXPECT_NE(s.error.find("a name (a run of letters, digits and '_') longer than 4096 characters "
                           "(limits::kMaxIdentifierChars); shorten it"),
              std::string::npos)
        << s.error.substr(0, 300);
  }
  // 4096 is still fine.
  const std::string ok(4096, 'b');
  EXPECT_EQ(prepare_torch_ext_source("torch::Tensor f(torch::Tensor " + ok + ") { return " + ok + "; }\n").entry, "f");
}

TEST(TorchExtSourceTest, PathologicalSourcesStayLinear) {
  // Each used to rescan the rest of the source: quadratic in a megabyte.
  std::string launches;
  for (int i = 0; i < 300000; ++i) launches += "<<<";
  int count = -1;
  EXPECT_EQ(give_launches_the_stream(launches, "s", &count), launches);
  EXPECT_EQ(count, 0);
  std::string candidates;
  for (int i = 0; i < 50000; ++i) candidates += "torch::Tensor f(torch::Tensor x, ";
  EXPECT_NE(prepare_torch_ext_source(candidates).error.find("no function returning torch::Tensor"), std::string::npos);
  // A name repeated in the sources list copies its string each time: bounded.
  std::string py = "import torch\nfrom torch.utils.cpp_extension import load_inline\nsrc = \"\"\"" +
                   std::string(100000, ' ') + "\"\"\"\nm = load_inline(name='x', cuda_sources=[";
  for (int i = 0; i < 200; ++i) py += "src, ";
  py += "], functions=['f'])\n";
  EXPECT_NE(prepare_torch_ext_source(py).error.find("the sources add up to more than 16777216 bytes"),
            std::string::npos);
}

TEST(TorchExtSourceTest, TooManyFunctionsAreRefused) {
  std::string py =
      "import torch\nfrom torch.utils.cpp_extension import load_inline\nsrc = \"\"\"int x;\"\"\"\n"
      "m = load_inline(name='x', cuda_sources=src, functions=[";
  for (int i = 0; i < 65; ++i) py += "'f" + std::to_string(i) + "', ";
  py += "])\n";
  EXPECT_NE(prepare_torch_ext_source(py).error.find("lists 65 functions; at most 64 (limits::kMaxTorchExtFunctions)"),
            std::string::npos);
}

}  // namespace
}  // namespace kforge::env
