#include <gtest/gtest.h>

#include <cmath>

#include "kforge/core/reference.h"
#include "op_cases.h"

namespace kforge {
namespace {

using testing::tensor;

const at::Device kCpu(at::kCPU);

TaskSpec task_with(std::vector<TensorSpec> inputs, std::vector<TensorSpec> params = {}) {
  TaskSpec t;
  t.id = "test/inputs";
  t.inputs = std::move(inputs);
  t.params = std::move(params);
  t.nodes = {{"contiguous", {t.inputs[0].name}, "y", json::object()}};
  t.outputs = {"y"};
  return t;
}

TensorSpec spec(const std::string& name, std::vector<int64_t> shape, const std::string& kind, double a = 0,
                double b = 0, DType dtype = DType::kFloat32) {
  TensorSpec t = tensor(name, std::move(shape), dtype, kind);
  if (kind == "normal" || kind == "positive" || kind == "bernoulli") {
    if (kind != "positive") t.init.mean = a;
    if (kind == "normal") t.init.std = b;
    if (kind == "positive") t.init.low = a;
  } else if (kind == "uniform" || kind == "randint") {
    t.init.low = a;
    t.init.high = b;
  }
  return t;
}

TEST(MakeInputsTest, SameSeedSameTensorsDifferentSeedDifferent) {
  const TaskSpec t = task_with({tensor("x", {64, 32}), tensor("y", {64, 32})}, {tensor("w", {32, 32})});
  const auto a = ref::make_inputs(t, 42, kCpu);
  const auto b = ref::make_inputs(t, 42, kCpu);
  const auto c = ref::make_inputs(t, 43, kCpu);
  ASSERT_EQ(a.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::equal(a[i], b[i])) << i;
    EXPECT_FALSE(at::equal(a[i], c[i])) << i;
  }
  // Same shape and init but another name: another stream.
  EXPECT_FALSE(at::equal(a[0], a[1]));
}

TEST(MakeInputsTest, EachTensorDependsOnlyOnSeedAndName) {
  const auto alone = ref::make_inputs(task_with({tensor("x", {100})}), 9, kCpu);
  const auto with_more = ref::make_inputs(task_with({tensor("a", {7}), tensor("x", {100})}), 9, kCpu);
  EXPECT_TRUE(at::equal(alone[0], with_more[1]));
  EXPECT_NE(ref::tensor_seed(1, "x"), ref::tensor_seed(2, "x"));
  EXPECT_NE(ref::tensor_seed(1, "x"), ref::tensor_seed(1, "y"));
}

TEST(MakeInputsTest, LeavesTheGlobalGeneratorAlone) {
  at::manual_seed(123);
  const at::Tensor expected = at::randn({16});
  at::manual_seed(123);
  ref::make_inputs(task_with({tensor("x", {1000})}), 5, kCpu);
  EXPECT_TRUE(at::equal(at::randn({16}), expected));
}

TEST(MakeInputsTest, NormalAndUniformStatistics) {
  const auto in = ref::make_inputs(
      task_with({spec("n", {200000}, "normal", 1.5, 0.5), spec("u", {200000}, "uniform", -3, 5)}), 1, kCpu);
  EXPECT_NEAR(in[0].mean().item<double>(), 1.5, 0.01);
  EXPECT_NEAR(in[0].std().item<double>(), 0.5, 0.01);
  EXPECT_GE(in[1].min().item<double>(), -3.0);
  EXPECT_LT(in[1].max().item<double>(), 5.0);
  EXPECT_NEAR(in[1].mean().item<double>(), 1.0, 0.03);
  EXPECT_NEAR(in[1].max().item<double>(), 5.0, 0.01);
}

TEST(MakeInputsTest, KaimingAndXavierBoundsFollowTorchFans) {
  // nn.Linear(100, 64).weight: U(-1/sqrt(100), 1/sqrt(100)).
  // nn.Conv2d(8, 16, 3).weight: fan_in = 8 * 3 * 3 = 72.
  // xavier on [64, 100]: sqrt(6 / (100 + 64)).
  const auto in = ref::make_inputs(task_with({tensor("lin", {64, 100}, DType::kFloat32, "kaiming_uniform"),
                                              tensor("conv", {16, 8, 3, 3}, DType::kFloat32, "kaiming_uniform"),
                                              tensor("xav", {64, 100}, DType::kFloat32, "xavier_uniform")}),
                                   3, kCpu);
  const double bounds[] = {0.1, 1.0 / std::sqrt(72.0), std::sqrt(6.0 / 164.0)};
  for (size_t i = 0; i < 3; ++i) {
    const double max_abs = in[i].abs().max().item<double>();
    EXPECT_LE(max_abs, bounds[i]) << i;
    EXPECT_GT(max_abs, 0.97 * bounds[i]) << i;  // 6400 / 1152 draws reach close to the bound
    EXPECT_NEAR(in[i].mean().item<double>(), 0.0, 0.1 * bounds[i]) << i;
  }
}

TEST(MakeInputsTest, PositiveRandintBernoulliArangeZerosOnes) {
  const auto in = ref::make_inputs(
      task_with({spec("p", {10000}, "positive", 0.25), spec("r", {10000}, "randint", -3, 4, DType::kInt64),
                 spec("m", {20000}, "bernoulli", 0.2, 0, DType::kBool), tensor("a", {3, 4}, DType::kInt32, "arange"),
                 tensor("z", {5}, DType::kFloat16, "zeros"), tensor("o", {5}, DType::kUInt8, "ones")}),
      8, kCpu);
  EXPECT_GE(in[0].min().item<double>(), 0.25);
  EXPECT_LT(in[0].min().item<double>(), 0.26);
  EXPECT_EQ(in[1].scalar_type(), at::kLong);
  EXPECT_EQ(in[1].min().item<int64_t>(), -3);
  EXPECT_EQ(in[1].max().item<int64_t>(), 3);
  EXPECT_EQ(std::get<0>(at::_unique(in[1])).numel(), 7);  // every value of [-3, 4) appears
  EXPECT_EQ(in[2].scalar_type(), at::kBool);
  EXPECT_NEAR(in[2].to(at::kFloat).mean().item<double>(), 0.2, 0.01);
  EXPECT_TRUE(at::equal(in[3], at::arange(12, at::kInt).reshape({3, 4})));
  EXPECT_EQ(in[4].scalar_type(), at::kHalf);
  EXPECT_EQ(in[4].abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(at::equal(in[5], at::ones({5}, at::kByte)));
}

TEST(MakeInputsTest, EveryDtypeWithEveryRandomInit) {
  for (const auto& name : dtype_names()) {
    DType d;
    ASSERT_TRUE(parse_dtype(name, &d));
    for (const char* kind : {"normal", "uniform", "randint", "kaiming_uniform", "bernoulli", "positive"}) {
      TensorSpec s = tensor("t", {6, 7}, d, kind);
      const auto in = ref::make_inputs(task_with({s}), 4, kCpu);
      EXPECT_EQ(in[0].scalar_type(), ref::to_scalar_type(d)) << name << " " << kind;
      EXPECT_EQ(in[0].sizes(), (std::vector<int64_t>{6, 7})) << name << " " << kind;
    }
  }
}

TEST(MakeInputsTest, ZeroDimTensorsAndEmptyRandintRange) {
  auto in = ref::make_inputs(task_with({tensor("s", {})}), 4, kCpu);
  EXPECT_EQ(in[0].dim(), 0);
  TensorSpec bad = spec("r", {3}, "randint", 0.2, 0.7, DType::kInt32);
  try {
    ref::make_inputs(task_with({bad}), 1, kCpu);
    ADD_FAILURE() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no integer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kforge
