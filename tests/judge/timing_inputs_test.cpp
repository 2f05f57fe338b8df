// Fresh inputs for every timed call (judge/timing_inputs.h): each round's
// contents are new, and keep the distribution the task asks for.
#include "judge/timing_inputs.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kforge/core/reference.h"
#include "test_support.h"

namespace kforge::judge {
namespace {

TaskSpec mixed_task() {
  return testing::task_from_json(R"({"id": "t/inits",
    "inputs": [{"name": "n", "shape": [65536], "dtype": "float32", "init": {"kind": "normal", "mean": 2.0, "std": 3.0}},
               {"name": "u", "shape": [65536], "dtype": "float32", "init": {"kind": "uniform", "low": -1.0, "high": 3.0}},
               {"name": "k", "shape": [256, 256], "dtype": "float32", "init": "kaiming_uniform"},
               {"name": "i", "shape": [65536], "dtype": "int64", "init": {"kind": "randint", "low": 0, "high": 7}},
               {"name": "h", "shape": [65536], "dtype": "float16", "init": "normal"},
               {"name": "p", "shape": [65536], "dtype": "float32", "init": "positive"},
               {"name": "o", "shape": [64], "dtype": "float32", "init": "ones"},
               {"name": "a", "shape": [64], "dtype": "int64", "init": "arange"}],
    "nodes": [{"op": "add", "in": ["n", "u"], "out": "y"}],
    "outputs": ["y"]})");
}

double mean_of(const at::Tensor& t) { return t.to(at::kDouble).mean().item<double>(); }
double stddev_of(const at::Tensor& t) {
  at::Tensor d = t.to(at::kDouble);
  return (d - d.mean()).square().mean().sqrt().item<double>();
}

TEST(TimingInputs, EveryRoundIsNewAndNoneRepeatsThePool) {
  const TaskSpec task = mixed_task();
  TimingInputs fresh(task, 3, 12345, at::kCPU);
  ASSERT_EQ(fresh.pool_size(), 3u);
  std::vector<std::vector<at::Tensor>> rounds;
  for (uint64_t r = 0; r < 8; ++r) rounds.push_back(fresh.round(r));
  for (size_t a = 0; a < rounds.size(); ++a) {
    for (size_t b = a + 1; b < rounds.size(); ++b) {
      // Random-valued tensors share almost no element at the same position.
      for (size_t t : {0, 1, 2, 4}) {
        double same = rounds[a][t].eq(rounds[b][t]).to(at::kDouble).mean().item<double>();
        EXPECT_LT(same, 0.01) << "rounds " << a << " and " << b << ", input " << t;
      }
    }
  }
  // Values change, not just positions: a sorted round differs from every
  // sorted pool set (a lookup of remembered inputs finds nothing).
  for (uint64_t s = 0; s < 3; ++s) {
    std::vector<at::Tensor> pool = ref::make_inputs(task, 12345 + s, at::kCPU);
    at::Tensor pool_sorted = std::get<0>(pool[0].sort());
    for (const auto& round : rounds) EXPECT_FALSE(at::equal(std::get<0>(round[0].sort()), pool_sorted));
  }
}

TEST(TimingInputs, RoundsKeepTheTaskDistributions) {
  const TaskSpec task = mixed_task();
  TimingInputs fresh(task, 3, 777, at::kCPU);
  for (uint64_t r = 0; r < 4; ++r) {
    std::vector<at::Tensor> in = fresh.round(r);
    EXPECT_NEAR(mean_of(in[0]), 2.0, 0.1);
    EXPECT_NEAR(stddev_of(in[0]), 3.0, 0.1);
    EXPECT_GE(in[1].min().item<double>(), -1.0);
    EXPECT_LT(in[1].max().item<double>(), 3.0);
    EXPECT_NEAR(mean_of(in[1]), 1.0, 0.05);
    EXPECT_NEAR(stddev_of(in[1]), 4.0 / std::sqrt(12.0), 0.05);
    const double bound = 1.0 / std::sqrt(256.0);  // kaiming_uniform, a = sqrt(5): 1/sqrt(fan_in)
    EXPECT_LE(in[2].abs().max().item<double>(), bound + 1e-6);
    EXPECT_NEAR(stddev_of(in[2]), 2 * bound / std::sqrt(12.0), 0.01);
    EXPECT_EQ(in[3].scalar_type(), at::kLong);
    EXPECT_GE(in[3].min().item<int64_t>(), 0);
    EXPECT_LE(in[3].max().item<int64_t>(), 6);
    EXPECT_NEAR(mean_of(in[3]), 3.0, 0.1);
    EXPECT_EQ(in[4].scalar_type(), at::kHalf);
    EXPECT_NEAR(stddev_of(in[4]), 1.0, 0.05);
    EXPECT_GT(in[5].min().item<double>(), 0.0);  // positive stays positive
    EXPECT_TRUE(at::equal(in[6], at::ones({64})));
    EXPECT_TRUE(at::equal(in[7], at::arange(64)));
  }
}

TEST(TimingInputs, DeterministicForASeed) {
  const TaskSpec task = testing::elementwise_chain_task(1024);
  TimingInputs a(task, 2, 99, at::kCPU), b(task, 2, 99, at::kCPU);
  std::vector<at::Tensor> ra = a.round(5), rb = b.round(5);
  for (size_t i = 0; i < ra.size(); ++i) EXPECT_TRUE(at::equal(ra[i], rb[i]));
}

}  // namespace
}  // namespace kforge::judge
