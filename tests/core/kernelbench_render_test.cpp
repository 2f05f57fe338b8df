#include "kforge/core/kernelbench_render.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>

#include "kforge/core/process.h"
#include "kforge/core/reference.h"
#include "op_cases.h"

namespace kforge {
namespace {

using testing::op_cases;
using testing::tensor;

#define EXPECT_CONTAINS(haystack, needle)                           \
  do {                                                              \
    const std::string h_ = (haystack);                              \
    EXPECT_NE(h_.find(needle), std::string::npos) << "in:\n" << h_; \
  } while (0)

TaskSpec gemm_gelu_task() {
  TaskSpec t;
  t.id = "synth/0001a3f2";
  t.source = "synth";
  t.description = "GEMM, tanh-GELU and a \"residual\" add";
  t.inputs = {tensor("x", {64, 32})};
  t.params = {tensor("w", {32, 32}, DType::kFloat32, "kaiming_uniform")};
  t.nodes = {{"matmul", {"x", "w"}, "t0", json::object()},
             {"gelu", {"t0"}, "t1", {{"approximate", "tanh"}}},
             {"add", {"t1", "x"}, "y", json::object()}};
  t.outputs = {"y"};
  return t;
}

// A task whose names are not usable as Python identifiers as written.
TaskSpec awkward_names_task() {
  TaskSpec t;
  t.id = "test/awkward_names";
  t.inputs = {tensor("in", {4, 6}), tensor("x.1", {4, 6})};
  t.params = {tensor("2w", {6, 6}, DType::kFloat32, "xavier_uniform"), tensor("steps", {4}, DType::kInt64, "arange")};
  t.nodes = {{"matmul", {"in", "2w"}, "self", json::object()},
             {"add", {"self", "x.1"}, "torch", json::object()},
             {"sum", {"torch"}, "F", {{"dim", 1}}},
             {"mul", {"steps"}, "X_1_SHAPE", {{"other", 2}}}};
  t.outputs = {"F", "X_1_SHAPE"};
  return t;
}

TEST(KernelBenchRenderTest, HasTheKernelBenchStructure) {
  const std::string py = render_kernelbench(gemm_gelu_task());
  EXPECT_CONTAINS(py, "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n");
  EXPECT_CONTAINS(py, "X_SHAPE = (64, 32)\nW_SHAPE = (32, 32)\n");
  EXPECT_CONTAINS(py, "class Model(nn.Module):\n    \"\"\"GEMM, tanh-GELU and a \\\"residual\\\" add");
  EXPECT_CONTAINS(py, "self.w = nn.Parameter(torch.empty(W_SHAPE, dtype=torch.float32).uniform_(");
  EXPECT_CONTAINS(py, "def forward(self, x):\n");
  EXPECT_CONTAINS(py, "        t0 = torch.matmul(x, self.w)\n");
  EXPECT_CONTAINS(py, "        t1 = F.gelu(t0, approximate='tanh')\n");
  EXPECT_CONTAINS(py, "        y = torch.add(t1, x)\n        return y\n");
  EXPECT_CONTAINS(py, "def get_inputs():\n    x = torch.empty(X_SHAPE, dtype=torch.float32).normal_(0.0, 1.0)\n");
  EXPECT_CONTAINS(py, "    return [x]\n");
  EXPECT_CONTAINS(py, "def get_init_inputs():\n    return []\n");
  // kaiming_uniform(a=sqrt(5)) on [32, 32]: bound 1/sqrt(32).
  EXPECT_CONTAINS(py, ".uniform_(-0.17677669529663687, 0.17677669529663687)");
}

TEST(KernelBenchRenderTest, SanitizesNamesIntoUniqueIdentifiers) {
  const TaskSpec t = awkward_names_task();
  const auto names = kernelbench_names(t);
  std::set<std::string> seen;
  for (const auto& [value, py] : names) {
    EXPECT_TRUE(seen.insert(py).second) << "duplicate " << py;
    ASSERT_FALSE(py.empty());
    EXPECT_FALSE(std::isdigit(static_cast<unsigned char>(py[0]))) << py;
    for (char ch : py) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') << py;
  }
  EXPECT_EQ(names.at("x.1"), "x_1");
  EXPECT_NE(names.at("in"), "in");
  EXPECT_NE(names.at("self"), "self");
  EXPECT_NE(names.at("torch"), "torch");
  EXPECT_NE(names.at("F"), "F");
  const std::string py = render_kernelbench(t);
  // The node named like a shape constant does not clobber the constant.
  EXPECT_CONTAINS(py, "X_1_SHAPE = (4, 6)\n");
  EXPECT_NE(names.at("X_1_SHAPE"), "X_1_SHAPE");
  EXPECT_CONTAINS(py, "self.register_buffer('steps', torch.arange(4).reshape(STEPS_SHAPE).to(torch.int64))");
}

TEST(KernelBenchRenderTest, RejectsGraphsThatDoNotTypeCheck) {
  TaskSpec t = gemm_gelu_task();
  t.params[0].shape = {16, 32};
  try {
    render_kernelbench(t);
    ADD_FAILURE() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "node 0 (matmul): inner dimensions differ");
  }
}

// Scratch files go through POSIX calls rather than std::filesystem: PyTorch
// 2.x wheels export their own std::filesystem symbols from libtorch.so, and
// its remove_all crashed when a test linked against it called ours.
std::string make_scratch_dir() {
  std::string path = ::testing::TempDir() + "kforge_render_XXXXXX";
  if (::mkdtemp(path.data()) == nullptr) return "";
  return path;
}

void remove_flat_dir(const std::string& path) {
  if (DIR* d = ::opendir(path.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") ::unlink((path + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(path.c_str());
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_raw(const at::Tensor& t, const std::string& path) {
  const at::Tensor c = t.contiguous();
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * c.element_size()));
  ASSERT_TRUE(out.good()) << path;
}

// Renders every case, runs the Python with /usr/bin/python3's torch on the
// C++ make_inputs tensors, and compares with the C++ run_reference outputs.
TEST(KernelBenchRenderTest, RenderedPythonComputesWhatTheReferenceComputes) {
  const std::string dir = make_scratch_dir();
  ASSERT_FALSE(dir.empty()) << "cannot create a scratch directory under " << ::testing::TempDir();

  std::vector<std::pair<std::string, TaskSpec>> tasks;
  for (const auto& c : op_cases()) tasks.emplace_back(c.label, c.task);
  tasks.emplace_back("awkward_names", awkward_names_task());
  tasks.emplace_back("gemm_gelu", gemm_gelu_task());

  json manifest = json::array();
  for (const auto& [label, task] : tasks) {
    const std::string module = dir + "/" + label + ".py";
    std::ofstream(module) << render_kernelbench(task);
    const auto names = kernelbench_names(task);
    const std::vector<at::Tensor> inputs = ref::make_inputs(task, 1234, at::Device(at::kCPU));
    const std::vector<at::Tensor> outputs = ref::run_reference(task, inputs);
    json c = {{"label", label}, {"module", module}, {"rtol", 1e-4}, {"atol", 1e-5}};
    const auto specs = task.kernel_inputs();
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::string file = dir + "/" + label + ".in" + std::to_string(i);
      write_raw(inputs[i], file);
      c["inputs"].push_back({{"py", names.at(specs[i].name)},
                             {"file", file},
                             {"dtype", dtype_name(specs[i].dtype)},
                             {"shape", specs[i].shape},
                             {"param", i >= task.inputs.size()}});
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string file = dir + "/" + label + ".out" + std::to_string(i);
      write_raw(outputs[i], file);
      c["outputs"].push_back({{"file", file},
                              {"dtype", dtype_name(ref::from_scalar_type(outputs[i].scalar_type()))},
                              {"shape", outputs[i].sizes().vec()}});
    }
    manifest.push_back(c);
  }
  std::ofstream(dir + "/manifest.json") << manifest.dump(1);

  const std::vector<std::string> argv = {find_on_path(KFORGE_PYTHON).string(),
                                         KFORGE_SOURCE_DIR "/tests/core/render_harness.py", dir + "/manifest.json",
                                         dir + "/results.json"};
  ProcessOptions options;
  options.timeout_s = std::numeric_limits<double>::infinity();  // as long as PyTorch takes; ctest bounds the test
  options.output_file = dir + "/harness.log";
  const ProcessResult r = run_process(argv, options);
  ASSERT_TRUE(r.ok()) << KFORGE_PYTHON << " " << argv[1] << " (exit " << r.exit_code << ")\n"
                      << slurp(dir + "/harness.log");
  const json results = json::parse(slurp(dir + "/results.json"));
  ASSERT_EQ(results.size(), tasks.size());
  for (const auto& [label, task] : tasks) {
    ASSERT_TRUE(results.contains(label)) << label;
    EXPECT_TRUE(results[label]["ok"].get<bool>())
        << label << ": " << results[label]["detail"].get<std::string>() << "\n"
        << slurp(dir + "/" + label + ".py");
  }
  // Kept after a failure, for a look at the rendered modules.
  if (!::testing::Test::HasFailure()) remove_flat_dir(dir);
}

}  // namespace
}  // namespace kforge
