#include "kforge/core/reference.h"

#include <gtest/gtest.h>

#include <set>

#include "kforge/core/op_registry.h"
#include "op_cases.h"

namespace kforge {
namespace {

using testing::op_cases;
using testing::OpCase;
using testing::single_op_task;
using testing::tensor;

const at::Device kCpu(at::kCPU);

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_close(const at::Tensor& actual, const at::Tensor& expected, double tol, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type()) << what;
  if (at::isFloatingType(actual.scalar_type())) {
    const at::Tensor a = actual.to(at::kDouble), e = expected.to(at::kDouble);
    const double err = (a - e).abs().max().item<double>();
    EXPECT_TRUE(at::allclose(a, e, tol, tol)) << what << ": max abs error " << err;
  } else {
    EXPECT_TRUE(at::equal(actual, expected)) << what << "\nactual:\n" << actual << "\nexpected:\n" << expected;
  }
}

TEST(ReferenceTest, EveryOpOfTheVocabularyHasAnExecutionCase) {
  std::set<std::string> covered;
  for (const auto& c : op_cases()) {
    for (const auto& n : c.task.nodes) covered.insert(n.op);
  }
  for (const auto& name : op_registry().names()) EXPECT_TRUE(covered.count(name)) << "no execution case for " << name;
}

// One test per property over every case rather than a test per case: each
// ctest entry is a process that loads libtorch (~1-2 s here), and the case
// label in every message says which op failed.
TEST(ReferenceTest, EveryCaseMatchesItsIndependentExpectationAndInferredTypes) {
  for (const OpCase& c : op_cases()) {
    SCOPED_TRACE(c.label);
    const std::vector<at::Tensor> inputs = ref::make_inputs(c.task, 7, kCpu);
    const std::vector<at::Tensor> outputs = ref::run_reference(c.task, inputs);
    const std::vector<at::Tensor> expected = c.expected(inputs);
    const std::vector<TensorType> inferred = infer_outputs(c.task);
    ASSERT_EQ(outputs.size(), c.task.outputs.size());
    ASSERT_EQ(expected.size(), outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string what = c.label + " output " + c.task.outputs[i];
      // Shape inference must agree with what ATen actually produced.
      EXPECT_EQ(outputs[i].sizes().vec(), inferred[i].shape) << what;
      EXPECT_EQ(ref::from_scalar_type(outputs[i].scalar_type()), inferred[i].dtype) << what;
      EXPECT_TRUE(outputs[i].is_contiguous()) << what;
      expect_close(outputs[i], expected[i], c.tolerance, what);
    }
  }
}

TEST(ReferenceTest, EveryCaseHasAFloat64ReferenceThatAgrees) {
  for (const OpCase& c : op_cases()) {
    const std::vector<at::Tensor> inputs = ref::make_inputs(c.task, 11, kCpu);
    const std::vector<at::Tensor> single = ref::run_reference(c.task, inputs);
    const std::vector<at::Tensor> dbl = ref::run_reference(c.task, inputs, at::kDouble);
    ASSERT_EQ(single.size(), dbl.size()) << c.label;
    for (size_t i = 0; i < dbl.size(); ++i) {
      const std::string what = c.label + " output " + c.task.outputs[i];
      if (at::isFloatingType(single[i].scalar_type())) {
        EXPECT_EQ(dbl[i].scalar_type(), at::kDouble) << what;
        EXPECT_TRUE(at::allclose(dbl[i], single[i].to(at::kDouble), 1e-3, 1e-3)) << what;
      } else if (c.label.rfind("argm", 0) != 0 && c.label != "graph_float64_mask_argmax") {
        // Integer results do not depend on the precision (except argmax ties).
        EXPECT_TRUE(at::equal(dbl[i], single[i])) << what;
      }
    }
  }
}

TEST(ReferenceTest, Float64PathRemovesFloat32Rounding) {
  TaskSpec t = single_op_task("matmul", {tensor("x", {32, 512})}, {}, {tensor("w", {512, 32})});
  const auto inputs = ref::make_inputs(t, 3, kCpu);
  const at::Tensor exact = at::mm(inputs[0].to(at::kDouble), inputs[1].to(at::kDouble));
  const double err64 = (ref::run_reference(t, inputs, at::kDouble)[0] - exact).abs().max().item<double>();
  const double err32 = (ref::run_reference(t, inputs)[0].to(at::kDouble) - exact).abs().max().item<double>();
  EXPECT_LT(err64, 1e-10);
  EXPECT_GT(err32, 1e-7);
}

TEST(ReferenceTest, HalfPrecisionTasksRunOnCpuAndKeepTheirDtype) {
  for (DType d : {DType::kBFloat16, DType::kFloat16}) {
    TaskSpec t;
    t.id = "test/half";
    t.inputs = {tensor("x", {8, 64}, d)};
    t.params = {tensor("w", {16, 64}, d, "kaiming_uniform")};
    t.nodes = {{"linear", {"x", "w"}, "h", json::object()}, {"gelu", {"h"}, "y", json::object()}};
    t.outputs = {"y"};
    const auto inputs = ref::make_inputs(t, 5, kCpu);
    ASSERT_EQ(inputs[0].scalar_type(), ref::to_scalar_type(d));
    const at::Tensor y = ref::run_reference(t, inputs)[0];
    EXPECT_EQ(y.scalar_type(), ref::to_scalar_type(d));
    const at::Tensor expected = at::gelu(at::linear(inputs[0].to(at::kFloat), inputs[1].to(at::kFloat)));
    EXPECT_TRUE(at::allclose(y.to(at::kFloat), expected, 2e-2, 2e-2)) << dtype_name(d);
  }
}

TEST(ReferenceTest, RunsAShapeVariant) {
  TaskSpec t = single_op_task("softmax", {tensor("x", {4, 8})});
  t.shape_variants = {{{"x", {2, 5}}}};
  const TaskSpec v = t.with_variant(0);
  const auto inputs = ref::make_inputs(v, 1, kCpu);
  EXPECT_EQ(ref::run_reference(v, inputs)[0].sizes(), (std::vector<int64_t>{2, 5}));
  // The base task rejects the variant's inputs and says how to fix the call.
  const std::string err = error_of([&] { ref::run_reference(t, inputs); });
  EXPECT_NE(err.find("kernel input 0 \"x\" has shape [2, 5], expected [4, 8]"), std::string::npos) << err;
  EXPECT_NE(err.find("with_variant"), std::string::npos) << err;
}

TEST(ReferenceTest, RejectsInputsThatDoNotMatchTheTask) {
  TaskSpec t = single_op_task("linear", {tensor("x", {4, 8})}, {}, {tensor("w", {3, 8})});
  auto inputs = ref::make_inputs(t, 1, kCpu);
  std::string err = error_of([&] { ref::run_reference(t, {inputs[0]}); });
  EXPECT_NE(err.find("got 1 kernel inputs, expected 2"), std::string::npos) << err;
  err = error_of([&] { ref::run_reference(t, {inputs[0], inputs[1].to(at::kDouble)}); });
  EXPECT_NE(err.find("kernel input 1 \"w\" has dtype Double, expected float32"), std::string::npos) << err;
  err = error_of([&] { ref::run_reference(t, {inputs[0], at::Tensor()}); });
  EXPECT_NE(err.find("undefined"), std::string::npos) << err;
  err = error_of([&] { ref::run_reference(t, inputs, at::kInt); });
  EXPECT_NE(err.find("not a floating type"), std::string::npos) << err;
}

TEST(ReferenceTest, OutputsNeverAliasInputsOrEachOther) {
  TaskSpec t;
  t.id = "test/alias";
  t.inputs = {tensor("x", {4, 6})};
  t.nodes = {{"contiguous", {"x"}, "a", json::object()}, {"reshape", {"x"}, "b", {{"shape", {24}}}}};
  t.outputs = {"a", "b"};
  const auto inputs = ref::make_inputs(t, 2, kCpu);
  const auto out = ref::run_reference(t, inputs);
  EXPECT_FALSE(out[0].is_alias_of(inputs[0]));
  EXPECT_FALSE(out[1].is_alias_of(inputs[0]));
  EXPECT_FALSE(out[1].is_alias_of(out[0]));
  EXPECT_TRUE(at::equal(out[0], inputs[0]));
  EXPECT_TRUE(at::equal(out[1], inputs[0].reshape({24})));
}

TEST(ReferenceTest, GraphErrorsComeBeforeExecution) {
  TaskSpec t = single_op_task("matmul", {tensor("x", {64, 32}), tensor("w", {16, 32})});
  t.id = "t1";
  const auto inputs = ref::make_inputs(t, 1, kCpu);
  const std::string err = error_of([&] { ref::run_reference(t, inputs); });
  EXPECT_NE(err.find("task 't1': node 0 (matmul): inner dimensions differ"), std::string::npos) << err;
}

TEST(ReferenceTest, ScalarTypeMappingRoundTripsEveryDtype) {
  for (const auto& name : dtype_names()) {
    DType d;
    ASSERT_TRUE(parse_dtype(name, &d));
    EXPECT_EQ(ref::from_scalar_type(ref::to_scalar_type(d)), d) << name;
  }
  const std::string err = error_of([] { ref::from_scalar_type(at::kComplexFloat); });
  EXPECT_NE(err.find("not a task dtype"), std::string::npos) << err;
}

}  // namespace
}  // namespace kforge
