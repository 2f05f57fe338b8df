// The reference interpreter and input creation on a CUDA device (label gpu):
// the same graphs as the CPU suite, checked against the CPU reference.
#include <gtest/gtest.h>

#include "kforge/core/reference.h"
#include "op_cases.h"

namespace kforge {
namespace {

using testing::op_cases;
using testing::tensor;

const at::Device kCuda(at::kCUDA, 0);
const at::Device kCpu(at::kCPU);

class ReferenceGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(at::hasCUDA()) << "this suite needs a CUDA device";
    // TF32 would make GPU convolutions differ from the CPU by ~1e-3.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
};

TEST_F(ReferenceGpuTest, EveryCaseMatchesTheCpuReference) {
  for (const auto& c : op_cases()) {
    const auto cpu_inputs = ref::make_inputs(c.task, 7, kCpu);
    std::vector<at::Tensor> gpu_inputs;
    for (const auto& t : cpu_inputs) gpu_inputs.push_back(t.to(kCuda));
    const auto cpu_out = ref::run_reference(c.task, cpu_inputs);
    const auto gpu_out = ref::run_reference(c.task, gpu_inputs);
    ASSERT_EQ(cpu_out.size(), gpu_out.size()) << c.label;
    for (size_t i = 0; i < gpu_out.size(); ++i) {
      EXPECT_TRUE(gpu_out[i].is_cuda()) << c.label;
      EXPECT_TRUE(gpu_out[i].is_contiguous()) << c.label;
      ASSERT_EQ(gpu_out[i].scalar_type(), cpu_out[i].scalar_type()) << c.label;
      ASSERT_EQ(gpu_out[i].sizes(), cpu_out[i].sizes()) << c.label;
      const at::Tensor g = gpu_out[i].cpu();
      if (at::isFloatingType(g.scalar_type())) {
        EXPECT_TRUE(at::allclose(g.to(at::kDouble), cpu_out[i].to(at::kDouble), 1e-4, 1e-4))
            << c.label << ": max abs error " << (g.to(at::kDouble) - cpu_out[i].to(at::kDouble)).abs().max();
      } else if (c.label.rfind("argm", 0) != 0) {
        EXPECT_TRUE(at::equal(g, cpu_out[i])) << c.label;
      }
    }
    const auto dbl = ref::run_reference(c.task, gpu_inputs, at::kDouble);
    for (size_t i = 0; i < dbl.size(); ++i) {
      EXPECT_TRUE(dbl[i].is_cuda()) << c.label;
      if (at::isFloatingType(dbl[i].scalar_type())) {
        EXPECT_EQ(dbl[i].scalar_type(), at::kDouble) << c.label;
      }
    }
  }
}

TEST_F(ReferenceGpuTest, MakeInputsIsDeterministicOnTheDeviceAndLeavesGlobalStateAlone) {
  TaskSpec t;
  t.id = "test/gpu_inputs";
  t.inputs = {tensor("x", {1 << 20}), tensor("r", {4096}, DType::kInt32, "randint")};
  t.params = {tensor("w", {256, 400}, DType::kBFloat16, "kaiming_uniform")};
  t.nodes = {{"contiguous", {"x"}, "y", json::object()}};
  t.outputs = {"y"};

  at::manual_seed(5);
  const at::Tensor global_expected = at::randn({8}, at::TensorOptions().device(kCuda));
  at::manual_seed(5);
  const auto a = ref::make_inputs(t, 99, kCuda);
  EXPECT_TRUE(at::equal(at::randn({8}, at::TensorOptions().device(kCuda)), global_expected));

  const auto b = ref::make_inputs(t, 99, kCuda);
  const auto c = ref::make_inputs(t, 100, kCuda);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(a[i].is_cuda());
    EXPECT_TRUE(at::equal(a[i], b[i])) << i;
    EXPECT_FALSE(at::equal(a[i], c[i])) << i;
  }
  EXPECT_NEAR(a[0].mean().item<double>(), 0.0, 0.01);
  EXPECT_NEAR(a[0].std().item<double>(), 1.0, 0.01);
  EXPECT_GE(a[1].min().item<int64_t>(), 0);
  EXPECT_LE(a[1].max().item<int64_t>(), 9);
  EXPECT_EQ(a[2].scalar_type(), at::kBFloat16);
  EXPECT_LE(a[2].to(at::kFloat).abs().max().item<double>(), 0.0501);  // 1/sqrt(400), rounded to bf16
}

TEST_F(ReferenceGpuTest, HalfPrecisionRunsInItsOwnDtypeOnTheGpu) {
  TaskSpec t;
  t.id = "test/gpu_half";
  t.inputs = {tensor("x", {64, 256}, DType::kFloat16)};
  t.params = {tensor("w", {128, 256}, DType::kFloat16, "kaiming_uniform")};
  t.nodes = {{"linear", {"x", "w"}, "h", json::object()}, {"layer_norm", {"h"}, "y", json::object()}};
  t.outputs = {"y"};
  const auto inputs = ref::make_inputs(t, 3, kCuda);
  const at::Tensor y = ref::run_reference(t, inputs)[0];
  EXPECT_EQ(y.scalar_type(), at::kHalf);
  const at::Tensor y64 = ref::run_reference(t, inputs, at::kDouble)[0];
  EXPECT_TRUE(at::allclose(y.to(at::kDouble), y64, 2e-2, 2e-2));
  EXPECT_FALSE(at::equal(y.to(at::kDouble), y64));  // really computed in half, not in double
}

}  // namespace
}  // namespace kforge
