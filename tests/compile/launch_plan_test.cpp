#include "kforge/env/cuda/launch_plan.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kforge/core/error.h"

namespace kforge::env {
namespace {

const std::vector<std::string> kNames = {"x", "w", "y"};

json plan_json(const std::string& text) { return json::parse(text); }

// The message of the InputError that parsing `plan` raises ("" if none).
std::string parse_error(const json& plan) {
  try {
    parse_launch_plan(plan, kNames);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string eval_error(const LaunchPlan& plan, const ShapeMap& shapes) {
  try {
    evaluate_launch_plan(plan, shapes);
  } catch (const LaunchError& e) {
    return e.what();
  }
  return "";
}

template <typename T>
T read_slot(const KernelLaunch& k, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(k.arg_buffer()) + k.slots()[i].offset, sizeof(T));
  return v;
}

TEST(LaunchExprTest, IntegerArithmeticFollowsCSemanticsAndPrecedence) {
  const ShapeMap shapes = {{"x", {4096, 1024}}, {"w", {7}}};
  auto eval = [&](const std::string& text) {
    return LaunchExpr::parse(text, LaunchExpr::Kind::kInt, kNames).eval_int(shapes);
  };
  EXPECT_EQ(eval("1 + 2 * 3"), 7);
  EXPECT_EQ(eval("(1 + 2) * 3"), 9);
  EXPECT_EQ(eval("10 - 4 - 3"), 3);
  EXPECT_EQ(eval("-7 / 2"), -3);  // truncation, as in C
  EXPECT_EQ(eval("-7 % 3"), -1);
  EXPECT_EQ(eval("cdiv(10, 3)"), 4);
  EXPECT_EQ(eval("cdiv(-10, 3)"), -3);
  EXPECT_EQ(eval("cdiv(9, 3)"), 3);
  EXPECT_EQ(eval("min(5, 2, 9)"), 2);
  EXPECT_EQ(eval("max(5, 2, 9)"), 9);
  EXPECT_EQ(eval("numel(x)"), 4096 * 1024);
  EXPECT_EQ(eval("dim(x, 0)"), 4096);
  EXPECT_EQ(eval("shape(x, -1)"), 1024);
  EXPECT_EQ(eval("ndim(x) + ndim(w)"), 3);
  EXPECT_EQ(eval("cdiv(numel(x), 256)"), 16384);
}

TEST(LaunchExprTest, CanonicalTextParsesBackToTheSameValue) {
  const ShapeMap shapes = {{"x", {33, 5}}};
  for (const std::string text : {"1-(2-3)", "(1+2)*3", "-(4 - 9)", "cdiv( numel(x) ,32 )*2", "10/(5/2)", "- -3"}) {
    const LaunchExpr e = LaunchExpr::parse(text, LaunchExpr::Kind::kInt, kNames);
    const LaunchExpr again = LaunchExpr::parse(e.to_string(), LaunchExpr::Kind::kInt, kNames);
    EXPECT_EQ(again.eval_int(shapes), e.eval_int(shapes)) << text << " -> " << e.to_string();
    EXPECT_EQ(again.to_string(), e.to_string());
  }
  EXPECT_EQ(LaunchExpr::parse("1-(2-3)", LaunchExpr::Kind::kInt, kNames).to_string(), "1 - (2 - 3)");
  EXPECT_EQ(LaunchExpr::parse("(1*2)+3", LaunchExpr::Kind::kInt, kNames).to_string(), "1 * 2 + 3");
}

TEST(LaunchExprTest, SyntaxErrorsGiveTheColumn) {
  auto column_of = [](const std::string& text, LaunchExpr::Kind kind = LaunchExpr::Kind::kInt) -> size_t {
    try {
      LaunchExpr::parse(text, kind, kNames);
    } catch (const LaunchSyntaxError& e) {
      return e.column();
    }
    return 0;
  };
  EXPECT_EQ(column_of("cdiv(numel(x), 256"), 19u);  // missing ')'
  EXPECT_EQ(column_of("numel(z)"), 7u);             // unknown tensor
  EXPECT_EQ(column_of("3 $ 4"), 3u);
  EXPECT_EQ(column_of("cdiv(1)"), 1u);  // arity
  EXPECT_EQ(column_of("1.5 * 2"), 1u);  // float in an integer expression
  EXPECT_EQ(column_of("x + 1"), 1u);    // a tensor is not a number
  EXPECT_EQ(column_of("foo(1)"), 1u);
  EXPECT_EQ(column_of(""), 1u);
  EXPECT_EQ(column_of(std::string(70, '(') + "1" + std::string(70, ')')), 66u);  // nesting bound
  EXPECT_EQ(column_of("1.5 * 2", LaunchExpr::Kind::kFloat), 0u);
}

TEST(LaunchExprTest, EvaluationFaultsAreLaunchErrors) {
  const ShapeMap shapes = {{"x", {1 << 20, 1 << 20}}};
  auto fails = [&](const std::string& text, const std::string& expected) {
    try {
      LaunchExpr::parse(text, LaunchExpr::Kind::kInt, kNames).eval_int(shapes);
      ADD_FAILURE() << text << " did not fail";
    } catch (const LaunchError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  fails("numel(x) * numel(x)", "integer overflow");
  fails("9223372036854775807 + 1", "integer overflow");
  fails("1 / (dim(x, 0) - 1048576)", "division by zero");
  fails("cdiv(4, 0)", "division by zero");
  fails("5 % 0", "division by zero");
  fails("dim(x, 2)", "out of range");
  fails("numel(w)", "no shape was given for tensor 'w'");
}

TEST(LaunchPlanTest, ParsesAndNormalizesAKernelList) {
  const LaunchPlan plan = parse_launch_plan(plan_json(R"J({"kernels": [
      {"name": "scale<float, 4>", "grid": ["cdiv(numel(x),256)"], "block": [256], "shared_mem": "4*256",
       "args": ["x", "y", "i64(numel(x))", "f32(0.5)"]},
      {"name": "finish", "grid": 1, "block": [32, 4], "args": []}]})J"),
                                            kNames);
  ASSERT_EQ(plan.kernels.size(), 2u);
  const json normalized = to_json(plan);
  EXPECT_EQ(normalized["kernels"][0]["grid"], json({"cdiv(numel(x), 256)", "1", "1"}));
  EXPECT_EQ(normalized["kernels"][0]["block"], json({"256", "1", "1"}));
  EXPECT_EQ(normalized["kernels"][0]["shared_mem"], "4 * 256");
  EXPECT_EQ(normalized["kernels"][0]["args"], json({"x", "y", "i64(numel(x))", "f32(0.5)"}));
  EXPECT_EQ(normalized["kernels"][1]["block"], json({"32", "4", "1"}));
  EXPECT_EQ(normalized["kernels"][1]["shared_mem"], "0");
  // The normalized form is a fixed point.
  EXPECT_EQ(to_json(parse_launch_plan(normalized, kNames)), normalized);
}

TEST(LaunchPlanTest, AcceptsASingleKernelWithoutTheList) {
  const LaunchPlan plan = parse_launch_plan(
      plan_json(R"J({"name": "k", "grid": "dim(x, 0)", "block": 128, "args": ["x", "u32(dim(x, 1))"]})J"), kNames);
  ASSERT_EQ(plan.kernels.size(), 1u);
  EXPECT_EQ(plan.kernels[0].name, "k");
  EXPECT_EQ(plan.kernels[0].args[1].type, LaunchArgType::kU32);
}

TEST(LaunchPlanTest, ErrorsNameTheJsonPathAndTheColumn) {
  std::string e =
      parse_error(plan_json(R"J({"kernels": [{"name": "k", "grid": ["cdiv(numel(q), 256)"], "block": 256}]})J"));
  EXPECT_NE(e.find("/launch/kernels/0/grid/0"), std::string::npos) << e;
  EXPECT_NE(e.find("at column 12"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown tensor 'q'"), std::string::npos) << e;
  EXPECT_NE(e.find("x, w, y"), std::string::npos) << e;

  e = parse_error(plan_json(R"J({"name": "k", "grid": 1, "block": 1, "args": ["x", "i32(dim(x, 0)"]})J"));
  EXPECT_NE(e.find("/launch/args/1"), std::string::npos) << e;
  EXPECT_NE(e.find("at column 13: expected ')'"), std::string::npos) << e;

  e = parse_error(plan_json(R"J({"name": "k", "grid": 1, "block": 1, "args": ["i32(5) + 1"]})J"));
  EXPECT_NE(e.find("must end with ')'"), std::string::npos) << e;

  e = parse_error(plan_json(R"J({"name": "k", "grid": 1, "block": 1, "args": ["xx"]})J"));
  EXPECT_NE(e.find("did you mean \"x\""), std::string::npos) << e;

  e = parse_error(plan_json(R"J({"name": "k", "grid": 1, "block": 1, "args": [42]})J"));
  EXPECT_NE(e.find("i32(42)"), std::string::npos) << e;

  e = parse_error(plan_json(R"J({"name": "k", "grid": 1, "block": 1, "args": ["i16(3)"]})J"));
  EXPECT_NE(e.find("typed scalar"), std::string::npos) << e;

  e = parse_error(plan_json(R"J({"name": "k", "grid": [1, 1, 1, 1], "block": 1})J"));
  EXPECT_NE(e.find("/launch/grid"), std::string::npos) << e;
  EXPECT_NE(e.find("1 to 3"), std::string::npos) << e;

  e = parse_error(plan_json(R"J({"name": "k", "grid": 1, "block": 1, "sharedmem": 0})J"));
  EXPECT_NE(e.find("did you mean \"shared_mem\""), std::string::npos) << e;

  e = parse_error(plan_json(R"J({"name": "k\"; evil", "grid": 1, "block": 1})J"));
  EXPECT_NE(e.find("/launch/name"), std::string::npos) << e;

  e = parse_error(plan_json(R"J({"kernels": []})J"));
  EXPECT_NE(e.find("non-empty"), std::string::npos) << e;

  e = parse_error(plan_json(R"J({"name": "k", "grid": "cdiv(1)", "block": 1})J"));
  EXPECT_NE(e.find("cdiv() takes 2 arguments, got 1"), std::string::npos) << e;
}

TEST(LaunchPlanTest, ConstantDimensionsAreCheckedAtParseTime) {
  std::string e = parse_error(plan_json(R"J({"name": "k", "grid": 1, "block": 2048})J"));
  EXPECT_NE(e.find("block.x is 2048"), std::string::npos) << e;
  e = parse_error(plan_json(R"J({"name": "k", "grid": 1, "block": [64, 32]})J"));
  EXPECT_NE(e.find("2048 threads"), std::string::npos) << e;
  e = parse_error(plan_json(R"J({"name": "k", "grid": [1, 0], "block": 1})J"));
  EXPECT_NE(e.find("grid.y is 0"), std::string::npos) << e;
  e = parse_error(plan_json(R"J({"name": "k", "grid": 1, "block": 1, "shared_mem": "1 << 20"})J"));
  EXPECT_NE(e.find("/launch/shared_mem"), std::string::npos) << e;
}

TEST(LaunchPlanTest, EvaluatesPerShapeVariant) {
  const LaunchPlan plan = parse_launch_plan(
      plan_json(R"J({"name": "scale<float, 4>", "grid": ["cdiv(numel(x), 256)", "dim(w, 0)"], "block": [256],
                    "shared_mem": "dim(x, -1) * 4", "args": ["x", "i64(numel(x))"]})J"),
      kNames);
  const auto big = evaluate_launch_plan(plan, {{"x", {4096, 1024}}, {"w", {3}}, {"y", {4096, 1024}}});
  ASSERT_EQ(big.size(), 1u);
  EXPECT_EQ(big[0].grid[0], 16384u);
  EXPECT_EQ(big[0].grid[1], 3u);
  EXPECT_EQ(big[0].grid[2], 1u);
  EXPECT_EQ(big[0].block[0], 256u);
  EXPECT_EQ(big[0].shared_mem_bytes, 4096u);
  EXPECT_EQ(read_slot<int64_t>(big[0], 1), 4096 * 1024);
  const auto small = evaluate_launch_plan(plan, {{"x", {2048, 512}}, {"w", {3}}});
  EXPECT_EQ(small[0].grid[0], 4096u);
  EXPECT_EQ(small[0].shared_mem_bytes, 2048u);
  EXPECT_EQ(read_slot<int64_t>(small[0], 1), 2048 * 512);
}

TEST(LaunchPlanTest, PacksTypedArgumentsAtTheirNaturalAlignment) {
  const LaunchPlan plan = parse_launch_plan(plan_json(R"J({"name": "k", "grid": 1, "block": 1,
                    "args": ["x", "i32(dim(x, 0))", "i64(numel(x))", "f32(0.5)", "f64(1.0 / dim(x, 1))",
                             "u32(7)", "y", "u64(3)"]})J"),
                                            kNames);
  auto launches = evaluate_launch_plan(plan, {{"x", {6, 4}}, {"y", {6, 4}}});
  KernelLaunch& k = launches[0];
  const std::vector<size_t> offsets = {0, 8, 16, 24, 32, 40, 48, 56};
  const std::vector<size_t> sizes = {8, 4, 8, 4, 8, 4, 8, 8};
  ASSERT_EQ(k.slots().size(), offsets.size());
  for (size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_EQ(k.slots()[i].offset, offsets[i]) << i;
    EXPECT_EQ(k.slots()[i].size, sizes[i]) << i;
  }
  EXPECT_EQ(k.arg_buffer_size(), 64u);
  EXPECT_EQ(read_slot<int32_t>(k, 1), 6);
  EXPECT_EQ(read_slot<int64_t>(k, 2), 24);
  EXPECT_EQ(read_slot<float>(k, 3), 0.5f);
  EXPECT_EQ(read_slot<double>(k, 4), 0.25);
  EXPECT_EQ(read_slot<uint32_t>(k, 5), 7u);
  EXPECT_EQ(read_slot<uint64_t>(k, 7), 3u);

  int x_storage = 0;
  int y_storage = 0;
  k.bind_tensors({{"x", &x_storage}, {"y", &y_storage}});
  std::vector<void*> params = k.kernel_params();
  ASSERT_EQ(params.size(), 8u);
  EXPECT_EQ(*static_cast<void**>(params[0]), &x_storage);
  EXPECT_EQ(*static_cast<void**>(params[6]), &y_storage);
  EXPECT_EQ(*static_cast<int32_t*>(params[1]), 6);
  EXPECT_EQ(*static_cast<double*>(params[4]), 0.25);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(params[i]) % sizes[i], 0u) << "argument " << i << " is misaligned";
  }
  EXPECT_THROW(k.bind_tensors({{"x", &x_storage}}), LaunchError);
}

TEST(LaunchPlanTest, EvaluationRejectsImpossibleLaunches) {
  auto plan = [](const std::string& kernel) { return parse_launch_plan(plan_json(kernel), kNames); };
  const ShapeMap shapes = {{"x", {4096, 1024}}, {"w", {1 << 20, 1 << 20}}};

  std::string e = eval_error(plan(R"J({"name": "scale<float, 4>", "grid": "dim(x, 0) - 4096", "block": 32})J"), shapes);
  EXPECT_NE(e.find("kernels[0] (scale<float, 4>): grid.x = dim(x, 0) - 4096 is 0"), std::string::npos) << e;

  e = eval_error(plan(R"J({"name": "k", "grid": "0 - dim(x, 0)", "block": 32})J"), shapes);
  EXPECT_NE(e.find("is -4096"), std::string::npos) << e;

  e = eval_error(plan(R"J({"name": "k", "grid": "numel(w) * numel(w)", "block": 32})J"), shapes);
  EXPECT_NE(e.find("integer overflow"), std::string::npos) << e;

  e = eval_error(plan(R"J({"name": "k", "grid": "numel(w)", "block": 32})J"), shapes);
  EXPECT_NE(e.find("grid.x = numel(w) is 1099511627776"), std::string::npos) << e;

  e = eval_error(plan(R"J({"name": "k", "grid": "cdiv(numel(x), dim(x, 1) - 1024)", "block": 32})J"), shapes);
  EXPECT_NE(e.find("division by zero"), std::string::npos) << e;

  e = eval_error(plan(R"J({"name": "k", "grid": 1, "block": "dim(x, 1) * 2"})J"), shapes);
  EXPECT_NE(e.find("block.x = dim(x, 1) * 2 is 2048"), std::string::npos) << e;

  e = eval_error(plan(R"J({"name": "k", "grid": 1, "block": ["dim(x, 1)", 2]})J"), shapes);
  EXPECT_NE(e.find("threads per block (x*y*z) is 2048"), std::string::npos) << e;

  e = eval_error(plan(R"J({"name": "k", "grid": [1, "dim(x, 0) * 16"], "block": 1})J"), shapes);
  EXPECT_NE(e.find("grid.y"), std::string::npos) << e;

  e = eval_error(plan(R"J({"name": "k", "grid": 1, "block": 1, "args": ["i32(numel(x) * 1024)"]})J"), shapes);
  EXPECT_NE(e.find("args[0] = i32(numel(x) * 1024): the value is 4294967296"), std::string::npos) << e;

  e = eval_error(plan(R"J({"name": "k", "grid": 1, "block": 1, "args": ["u32(0 - 1)"]})J"), shapes);
  EXPECT_NE(e.find("the value is -1"), std::string::npos) << e;

  e = eval_error(plan(R"J({"name": "k", "grid": 1, "block": 1, "args": ["f32(1.0 / (dim(x, 0) - 4096))"]})J"), shapes);
  EXPECT_NE(e.find("division by zero"), std::string::npos) << e;

  e = eval_error(plan(R"J({"name": "k", "grid": 1, "block": 1, "args": ["y"]})J"), shapes);
  EXPECT_NE(e.find("args[0] = y: no shape was given"), std::string::npos) << e;

  e = eval_error(plan(R"J({"name": "k", "grid": 1, "block": 1, "shared_mem": "numel(x)"})J"), shapes);
  EXPECT_NE(e.find("shared_mem = numel(x) is 4194304"), std::string::npos) << e;
}

TEST(LaunchPlanTest, TensorNamesComeFromInputsParamsAndOutputs) {
  TaskSpec task;
  task.inputs.push_back({"a", {2}, DType::kFloat32, {}});
  task.params.push_back({"b", {2}, DType::kFloat32, {}});
  task.outputs = {"c"};
  EXPECT_EQ(launch_tensor_names(task), (std::vector<std::string>{"a", "b", "c"}));
}

}  // namespace
}  // namespace kforge::env
