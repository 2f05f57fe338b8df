#include "kforge/core/op_registry.h"

#include <gtest/gtest.h>

#include <set>

namespace kforge {
namespace {

using Shape = std::vector<int64_t>;

TensorType f32(Shape shape, const std::string& name = "") {
  return TensorType(std::move(shape), DType::kFloat32, name);
}
TensorType typed(Shape shape, DType d, const std::string& name = "") { return TensorType(std::move(shape), d, name); }

GraphNode node(const std::string& op, size_t n_inputs, json attrs = json::object()) {
  GraphNode n;
  n.op = op;
  for (size_t i = 0; i < n_inputs; ++i) n.in.push_back("in" + std::to_string(i));
  n.out = "y";
  n.attrs = std::move(attrs);
  return n;
}

TensorType infer(const std::string& op, const std::vector<TensorType>& in, json attrs = json::object()) {
  return infer_node(node(op, in.size(), std::move(attrs)), in);
}

std::string error_of(const std::string& op, const std::vector<TensorType>& in, json attrs = json::object()) {
  try {
    infer(op, in, std::move(attrs));
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no error>";
}

#define EXPECT_CONTAINS(haystack, needle)                               \
  do {                                                                  \
    const std::string h_ = (haystack);                                  \
    EXPECT_NE(h_.find(needle), std::string::npos) << "message: " << h_; \
  } while (0)

// ---- the registry itself ----

TEST(OpRegistryTest, VocabularyIsLargeAndDocumented) {
  const OpRegistry& r = op_registry();
  EXPECT_GE(r.names().size(), 45u);
  for (OpCategory c : op_categories()) EXPECT_FALSE(r.in_category(c).empty()) << op_category_name(c);
  for (const auto& name : r.names()) {
    const OpSchema* s = r.find(name);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->name, name);
    EXPECT_FALSE(s->doc.empty()) << name;
    EXPECT_LE(s->min_inputs, s->max_inputs) << name;
    for (const auto& a : s->attrs) EXPECT_FALSE(a.doc.empty()) << name << "." << a.name;
  }
  EXPECT_EQ(r.find("no_such_op"), nullptr);
  for (const char* required : {"matmul", "bmm", "linear", "conv3d", "conv_transpose2d", "gelu", "hardtanh",
                               "layer_norm", "batch_norm", "rms_norm", "logsumexp", "cumsum", "max_pool3d",
                               "adaptive_max_pool2d", "where", "sign", "log_softmax", "permute", "tril"}) {
    EXPECT_NE(r.find(required), nullptr) << required;
  }
}

// ---- a valid inference for every op ----

struct ValidCase {
  std::string op;
  std::vector<TensorType> in;
  json attrs;
  Shape shape;
  DType dtype = DType::kFloat32;
};

std::vector<ValidCase> valid_cases() {
  const DType i32 = DType::kInt32, i64 = DType::kInt64, b = DType::kBool, f16 = DType::kFloat16;
  std::vector<ValidCase> v = {
      {"matmul", {f32({64, 32}), f32({32, 16})}, {}, {64, 16}},
      {"matmul", {f32({2, 1, 4, 6}), f32({3, 6, 5})}, {}, {2, 3, 4, 5}},
      {"matmul", {f32({6}), f32({6})}, {}, {}},
      {"matmul", {f32({5, 6}), f32({6})}, {}, {5}},
      {"bmm", {f32({3, 4, 5}), f32({3, 5, 6})}, {}, {3, 4, 6}},
      {"linear", {f32({2, 3, 8}), f32({6, 8}), f32({6})}, {}, {2, 3, 6}},
      {"conv1d", {f32({2, 4, 16}), f32({6, 4, 3})}, {{"stride", 2}, {"padding", 1}}, {2, 6, 8}},
      {"conv2d",
       {f32({2, 4, 10, 10}), f32({6, 2, 3, 3})},
       {{"groups", 2}, {"dilation", 2}, {"padding", {1, 2}}},
       {2, 6, 8, 10}},
      {"conv2d", {f32({3, 9, 9}), f32({4, 3, 3, 3}), f32({4})}, {}, {4, 7, 7}},
      {"conv3d", {f32({1, 2, 6, 6, 6}), f32({4, 2, 3, 3, 3})}, {{"stride", {1, 2, 3}}}, {1, 4, 4, 2, 2}},
      {"conv_transpose1d",
       {f32({2, 4, 8}), f32({4, 3, 3})},
       {{"stride", 2}, {"padding", 1}, {"output_padding", 1}},
       {2, 3, 16}},
      {"conv_transpose2d", {f32({1, 4, 5, 5}), f32({4, 2, 3, 3})}, {{"stride", 2}, {"groups", 2}}, {1, 4, 11, 11}},
      {"conv_transpose3d", {f32({1, 2, 3, 3, 3}), f32({2, 3, 2, 2, 2})}, {{"stride", 2}}, {1, 3, 6, 6, 6}},
      {"relu", {typed({4, 5}, i32)}, {}, {4, 5}, i32},
      {"relu6", {f32({4})}, {}, {4}},
      {"leaky_relu", {f32({4})}, {{"negative_slope", 0.1}}, {4}},
      {"elu", {f32({4})}, {}, {4}},
      {"selu", {f32({4})}, {}, {4}},
      {"gelu", {typed({4, 2}, f16)}, {{"approximate", "tanh"}}, {4, 2}, f16},
      {"silu", {f32({4})}, {}, {4}},
      {"mish", {f32({4})}, {}, {4}},
      {"sigmoid", {f32({4})}, {}, {4}},
      {"tanh", {f32({4})}, {}, {4}},
      {"softplus", {f32({4})}, {{"beta", 2}}, {4}},
      {"softsign", {f32({4})}, {}, {4}},
      {"hardswish", {f32({4})}, {}, {4}},
      {"hardsigmoid", {f32({4})}, {}, {4}},
      {"hardtanh", {f32({4})}, {{"min_val", -2}, {"max_val", 2}}, {4}},
      {"layer_norm", {f32({4, 3, 8}), f32({3, 8}), f32({3, 8})}, {}, {4, 3, 8}},
      {"layer_norm", {f32({4, 3, 8})}, {{"normalized_shape", {3, 8}}}, {4, 3, 8}},
      {"group_norm", {f32({2, 6, 4, 4})}, {{"num_groups", 3}}, {2, 6, 4, 4}},
      {"batch_norm", {f32({4, 3, 5, 5}), f32({3}), f32({3})}, {}, {4, 3, 5, 5}},
      {"instance_norm", {f32({2, 3, 6})}, {}, {2, 3, 6}},
      {"rms_norm", {f32({4, 16}), f32({16})}, {}, {4, 16}},
      {"sum", {f32({3, 4, 5})}, {{"dim", {0, 2}}, {"keepdim", true}}, {1, 4, 1}},
      {"sum", {typed({3, 4}, b)}, {}, {}, i64},
      {"mean", {f32({3, 4, 5})}, {{"dim", -1}}, {3, 4}},
      {"amax", {f32({3, 4, 5})}, {{"dim", 1}}, {3, 5}},
      {"amin", {typed({3, 4}, i32)}, {{"dim", 0}}, {4}, i32},
      {"max", {f32({3, 4, 5})}, {{"dim", 1}, {"keepdim", true}}, {3, 1, 5}},
      {"max", {f32({3, 4, 5})}, {}, {}},
      {"min", {f32({3, 4, 5})}, {{"dim", 0}}, {4, 5}},
      {"prod", {typed({3, 4}, i32)}, {{"dim", 1}}, {3}, i64},
      {"argmax", {f32({3, 4, 5})}, {{"dim", 2}}, {3, 4}, i64},
      {"argmin", {f32({3, 4, 5})}, {}, {}, i64},
      {"logsumexp", {f32({3, 4, 5})}, {{"dim", {1, 2}}}, {3}},
      {"var", {f32({3, 4, 5})}, {{"dim", 1}, {"correction", 0}}, {3, 5}},
      {"std", {f32({3, 4, 5})}, {{"keepdim", true}}, {1, 1, 1}},
      {"norm", {f32({3, 4, 5})}, {{"p", 1}, {"dim", 0}}, {4, 5}},
      {"cumsum", {typed({3, 4}, i32)}, {{"dim", 1}}, {3, 4}, i64},
      {"max_pool1d", {f32({2, 3, 11})}, {{"kernel_size", 3}, {"stride", 2}}, {2, 3, 5}},
      {"max_pool2d",
       {f32({1, 2, 9, 9})},
       {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}, {"dilation", 2}, {"ceil_mode", true}},
       {1, 2, 4, 4}},
      {"max_pool3d", {f32({2, 4, 4, 4})}, {{"kernel_size", 2}}, {2, 2, 2, 2}},
      {"avg_pool1d", {f32({2, 3, 10})}, {{"kernel_size", 3}}, {2, 3, 3}},
      {"avg_pool2d",
       {f32({1, 2, 7, 7})},
       {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}, {"ceil_mode", true}},
       {1, 2, 4, 4}},
      {"avg_pool3d", {f32({1, 2, 5, 5, 5})}, {{"kernel_size", {2, 3, 2}}}, {1, 2, 2, 1, 2}},
      {"adaptive_avg_pool1d", {f32({2, 3, 8})}, {{"output_size", 4}}, {2, 3, 4}},
      {"adaptive_avg_pool2d", {f32({2, 3, 5, 7})}, {{"output_size", {1, 2}}}, {2, 3, 1, 2}},
      {"adaptive_avg_pool3d", {f32({1, 2, 4, 4, 4})}, {{"output_size", 2}}, {1, 2, 2, 2, 2}},
      {"adaptive_max_pool2d", {f32({2, 3, 6, 6})}, {{"output_size", {2, 3}}}, {2, 3, 2, 3}},
      {"add", {f32({4, 1, 6}), f32({5, 1})}, {{"alpha", 2}}, {4, 5, 6}},
      {"add", {typed({3}, i32)}, {{"other", 2}}, {3}, i32},
      {"sub", {typed({3}, i32)}, {{"other", 2.5}}, {3}, DType::kFloat32},
      {"mul", {typed({3}, b)}, {{"other", 3}}, {3}, i64},
      {"div", {typed({3}, i32), typed({3}, i32)}, {}, {3}, DType::kFloat32},
      {"maximum", {f32({2, 3}), f32({3})}, {}, {2, 3}},
      {"minimum", {f32({2, 3})}, {{"other", 0}}, {2, 3}},
      {"pow", {f32({2, 3})}, {{"other", 2}}, {2, 3}},
      {"eq", {typed({2, 3}, i32), typed({2, 3}, i32)}, {}, {2, 3}, b},
      {"ne", {f32({2, 3})}, {{"other", 0}}, {2, 3}, b},
      {"lt", {f32({2, 3}), f32({2, 1})}, {}, {2, 3}, b},
      {"le", {f32({2, 3})}, {{"other", 1.5}}, {2, 3}, b},
      {"gt", {f32({2, 3})}, {{"other", 0}}, {2, 3}, b},
      {"ge", {f32({2, 3})}, {{"other", 0}}, {2, 3}, b},
      {"where", {typed({4, 1}, b), f32({4, 6}), f32({6})}, {}, {4, 6}},
      {"clamp", {f32({2, 3})}, {{"min", -1}}, {2, 3}},
      {"abs", {typed({2}, i32)}, {}, {2}, i32},
      {"neg", {f32({2})}, {}, {2}},
      {"exp", {typed({2}, i64)}, {}, {2}, DType::kFloat32},
      {"log", {f32({2})}, {}, {2}},
      {"log1p", {f32({2})}, {}, {2}},
      {"sqrt", {f32({2})}, {}, {2}},
      {"rsqrt", {f32({2})}, {}, {2}},
      {"reciprocal", {f32({2})}, {}, {2}},
      {"square", {typed({2}, i32)}, {}, {2}, i32},
      {"sin", {f32({2})}, {}, {2}},
      {"cos", {f32({2})}, {}, {2}},
      {"erf", {f32({2})}, {}, {2}},
      {"sign", {f32({2})}, {}, {2}},
      {"softmax", {f32({3, 7})}, {{"dim", 0}}, {3, 7}},
      {"log_softmax", {f32({3, 7})}, {}, {3, 7}},
      {"transpose", {f32({3, 4, 5})}, {}, {3, 5, 4}},
      {"permute", {f32({3, 4, 5})}, {{"dims", {2, 0, -2}}}, {5, 3, 4}},
      {"reshape", {f32({3, 4, 5})}, {{"shape", {-1, 10}}}, {6, 10}},
      {"flatten", {f32({2, 3, 4, 5})}, {{"start_dim", 1}}, {2, 60}},
      {"squeeze", {f32({3, 1, 4, 1})}, {}, {3, 4}},
      {"squeeze", {f32({3, 1, 4})}, {{"dim", 0}}, {3, 1, 4}},
      {"unsqueeze", {f32({3, 4})}, {{"dim", -1}}, {3, 4, 1}},
      {"cat", {f32({2, 3}), f32({2, 5}), f32({2, 1})}, {{"dim", -1}}, {2, 9}},
      {"stack", {f32({2, 3}), f32({2, 3})}, {{"dim", 2}}, {2, 3, 2}},
      {"narrow", {f32({3, 4, 5})}, {{"dim", 2}, {"start", -3}, {"length", 2}}, {3, 4, 2}},
      {"slice", {f32({3, 10})}, {{"dim", 1}, {"start", -8}, {"end", 9}, {"step", 3}}, {3, 3}},
      {"slice", {f32({3, 10})}, {{"start", 1}, {"end", 100}}, {2, 10}},
      {"expand", {f32({3, 1})}, {{"shape", {2, -1, 4}}}, {2, 3, 4}},
      {"contiguous", {typed({3}, b)}, {}, {3}, b},
      {"repeat", {f32({2, 3})}, {{"repeats", {2, 1, 2}}}, {2, 2, 6}},
      {"tril", {f32({4, 5})}, {{"diagonal", -1}}, {4, 5}},
      {"triu", {f32({2, 4, 4})}, {}, {2, 4, 4}},
  };
  return v;
}

TEST(OpRegistryTest, InfersShapeAndDtypeForEveryOp) {
  std::set<std::string> covered;
  for (const auto& c : valid_cases()) {
    covered.insert(c.op);
    TensorType out;
    try {
      out = infer(c.op, c.in, c.attrs);
    } catch (const InputError& e) {
      ADD_FAILURE() << c.op << " " << c.attrs.dump() << ": " << e.what();
      continue;
    }
    EXPECT_EQ(out.shape, c.shape) << c.op << " " << c.attrs.dump();
    EXPECT_EQ(out.dtype, c.dtype) << c.op << " " << c.attrs.dump();
    EXPECT_EQ(out.name, "y");
  }
  for (const auto& name : op_registry().names()) EXPECT_TRUE(covered.count(name)) << "no inference case for " << name;
}

// ---- invalid nodes, by category, with the message checked ----

TEST(OpRegistryTest, MainLoopErrorsNameTheInputsAndTheExpectedShape) {
  EXPECT_CONTAINS(error_of("matmul", {f32({64, 32}, "x"), f32({16, 32}, "w")}),
                  "inner dimensions differ: in[0] \"x\" has shape [64, 32] and in[1] \"w\" has shape [16, 32]; "
                  "expected w of shape [32, N]");
  EXPECT_CONTAINS(error_of("matmul", {f32({2, 4, 6}), f32({3, 6, 5})}), "batch dimensions do not broadcast");
  EXPECT_CONTAINS(error_of("matmul", {f32({4, 6}), typed({6, 5}, DType::kFloat16)}),
                  "dtypes differ: in[0] is float32 and in[1] is float16");
  EXPECT_CONTAINS(error_of("bmm", {f32({4, 6}), f32({4, 6, 5})}), "expected a 3-d tensor [B, M, K]");
  EXPECT_CONTAINS(error_of("linear", {f32({5, 8}, "x"), f32({8, 6}, "w")}),
                  "expected w of shape [out_features, 8] (torch layout)");
  EXPECT_CONTAINS(error_of("linear", {f32({5, 8}), f32({6, 8}), f32({5})}), "bias does not match the weight");
  EXPECT_CONTAINS(error_of("conv2d", {f32({2, 3, 8, 8}, "x"), f32({4, 2, 3, 3}, "w")}),
                  "expected w of shape [C_out, 3, kH, kW]");
  EXPECT_CONTAINS(error_of("conv2d", {f32({2, 4, 8, 8}), f32({6, 2, 3, 3})}, {{"groups", 3}}),
                  "attr \"groups\" = 3 does not divide the 4 input channels");
  EXPECT_CONTAINS(error_of("conv2d", {f32({4, 8}), f32({6, 4, 3, 3})}), "expected (N, C_in, H, W)");
  EXPECT_CONTAINS(error_of("conv1d", {f32({2, 4, 2}), f32({6, 4, 5})}), "is larger than the padded input");
  EXPECT_CONTAINS(error_of("conv2d", {f32({2, 4, 8, 8}), f32({6, 4, 3, 3})}, {{"stride", {1, 2, 3}}}),
                  "attr \"stride\" has 3 values [1, 2, 3]; expected one int or a list of 2");
  EXPECT_CONTAINS(error_of("conv_transpose2d", {f32({1, 4, 5, 5}), f32({4, 2, 3, 3})}, {{"output_padding", 1}}),
                  "must be >= 0 and smaller than either stride or dilation");
  EXPECT_CONTAINS(error_of("conv_transpose1d", {f32({1, 4, 5}, "x"), f32({3, 2, 3}, "w")}),
                  "expected w of shape [4, C_out/groups, kL]");
}

TEST(OpRegistryTest, ActivationErrors) {
  EXPECT_CONTAINS(error_of("gelu", {typed({4}, DType::kInt32, "x")}),
                  "in[0] \"x\" has dtype int32; expected a floating-point tensor");
  EXPECT_CONTAINS(error_of("relu", {typed({4}, DType::kBool)}), "expected a numeric tensor");
  EXPECT_CONTAINS(error_of("hardtanh", {f32({4})}, {{"min_val", 2.0}, {"max_val", 1.0}}),
                  "attr \"min_val\" (2.0) must be below \"max_val\" (1.0)");
  EXPECT_CONTAINS(error_of("gelu", {f32({4})}, {{"approximate", "fast"}}),
                  "attr \"approximate\" must be one of \"none\", \"tanh\", got a string \"fast\"");
}

TEST(OpRegistryTest, NormErrors) {
  EXPECT_CONTAINS(error_of("layer_norm", {f32({4, 8}), f32({4})}), "weight does not match: in[1] has shape [4]");
  EXPECT_CONTAINS(error_of("layer_norm", {f32({4, 8})}, {{"normalized_shape", {4}}}),
                  "attr \"normalized_shape\" = [4] does not match the trailing dims of in[0] of shape [4, 8]");
  EXPECT_CONTAINS(error_of("layer_norm", {f32({4, 8})}, {{"normalized_ndim", 3}}), "must be in [1, 2]");
  EXPECT_CONTAINS(error_of("group_norm", {f32({2, 6, 4})}, {{"num_groups", 4}}),
                  "attr \"num_groups\" = 4 must be positive and divide the 6 channels");
  EXPECT_CONTAINS(error_of("group_norm", {f32({2, 6, 4})}), "missing required attr \"num_groups\"");
  EXPECT_CONTAINS(error_of("batch_norm", {f32({1, 3})}), "batch statistics need more than one value per channel");
  EXPECT_CONTAINS(error_of("batch_norm", {f32({4, 3}), f32({4})}), "weight does not match");
  EXPECT_CONTAINS(error_of("instance_norm", {f32({4, 3})}), "expected (N, C, *spatial)");
}

TEST(OpRegistryTest, ReductionErrors) {
  EXPECT_CONTAINS(error_of("sum", {f32({3, 4})}, {{"dim", 2}}),
                  "attr \"dim\" = 2 is out of range for a 2-d tensor (allowed -2 to 1)");
  EXPECT_CONTAINS(error_of("sum", {f32({3, 4})}, {{"dim", {1, -1}}}), "names dim 1 twice");
  EXPECT_CONTAINS(error_of("amax", {f32({3, 4})}, {{"dim", json::array()}}), "leave it out to reduce every dim");
  EXPECT_CONTAINS(error_of("argmax", {f32({3, 4})}, {{"keepdim", true}}), "attr \"keepdim\" needs attr \"dim\"");
  EXPECT_CONTAINS(error_of("mean", {typed({3, 4}, DType::kInt64)}), "expected a floating-point tensor");
  EXPECT_CONTAINS(error_of("var", {f32({1, 4})}, {{"dim", 0}}), "leaves no degrees of freedom");
  EXPECT_CONTAINS(error_of("max", {f32({3, 4})}, {{"dim", {0, 1}}}), "attr \"dim\" must be an integer");
  EXPECT_CONTAINS(error_of("cumsum", {f32({3, 4})}), "missing required attr \"dim\"");
}

TEST(OpRegistryTest, PoolingErrors) {
  EXPECT_CONTAINS(error_of("max_pool2d", {f32({1, 2, 8, 8})}, {{"kernel_size", 2}, {"padding", 2}}),
                  "must be >= 0 and at most half the kernel size");
  EXPECT_CONTAINS(error_of("avg_pool2d", {f32({1, 2, 3, 3})}, {{"kernel_size", 5}}), "the output would be empty");
  EXPECT_CONTAINS(error_of("max_pool2d", {f32({8, 8})}, {{"kernel_size", 2}}),
                  "expected (N, C, H, W) or unbatched (C, H, W)");
  EXPECT_CONTAINS(error_of("max_pool1d", {f32({1, 2, 8})}), "missing required attr \"kernel_size\"");
  EXPECT_CONTAINS(error_of("adaptive_avg_pool2d", {f32({1, 2, 8, 8})}, {{"output_size", {2, 0}}}),
                  "attr \"output_size\" must be positive");
}

TEST(OpRegistryTest, ElementwiseErrors) {
  EXPECT_CONTAINS(error_of("add", {f32({4, 3}, "a"), f32({4, 2}, "b")}),
                  "shapes do not broadcast: in[0] \"a\" has shape [4, 3] and in[1] \"b\" has shape [4, 2]");
  EXPECT_CONTAINS(error_of("mul", {f32({4}), typed({4}, DType::kFloat64)}), "dtypes differ");
  EXPECT_CONTAINS(error_of("add", {f32({4}), f32({4})}, {{"other", 1.0}}), "not both");
  EXPECT_CONTAINS(error_of("sub", {f32({4})}), "needs a second input tensor or the scalar attr \"other\"");
  EXPECT_CONTAINS(error_of("where", {f32({4}), f32({4}), f32({4})}), "the condition of where must be bool");
  EXPECT_CONTAINS(error_of("clamp", {f32({4})}), "needs at least one of the attrs \"min\" and \"max\"");
  EXPECT_CONTAINS(error_of("clamp", {f32({4})}, {{"min", 2}, {"max", 1}}), "is above \"max\"");
  EXPECT_CONTAINS(error_of("exp", {typed({4}, DType::kBool)}), "needs a numeric tensor");
  EXPECT_CONTAINS(error_of("add", {typed({4}, DType::kBool), typed({4}, DType::kBool)}), "arithmetic needs numeric");
}

TEST(OpRegistryTest, SoftmaxAndLayoutErrors) {
  EXPECT_CONTAINS(error_of("softmax", {f32({3, 4})}, {{"dim", -3}}), "out of range for a 2-d tensor");
  EXPECT_CONTAINS(error_of("log_softmax", {typed({3}, DType::kInt32)}), "expected a floating-point tensor");
  EXPECT_CONTAINS(error_of("reshape", {f32({3, 4})}, {{"shape", {5, -1}}}),
                  "cannot reshape in[0] of shape [3, 4] (12 elements) into [5, -1]: 12 is not a multiple of 5");
  EXPECT_CONTAINS(error_of("reshape", {f32({3, 4})}, {{"shape", {-1, -1}}}), "more than one -1");
  EXPECT_CONTAINS(error_of("reshape", {f32({3, 4})}, {{"shape", {5, 2}}}), "(10 elements)");
  EXPECT_CONTAINS(error_of("permute", {f32({3, 4})}, {{"dims", {0, 0}}}), "repeats dim 0");
  EXPECT_CONTAINS(error_of("permute", {f32({3, 4})}, {{"dims", {0}}}), "must list each of the 2 dims");
  EXPECT_CONTAINS(error_of("cat", {f32({2, 3}), f32({3, 3})}, {{"dim", 1}}), "shapes differ outside dim 1");
  EXPECT_CONTAINS(error_of("stack", {f32({2, 3}), f32({3, 2})}), "stack needs equal shapes");
  EXPECT_CONTAINS(error_of("narrow", {f32({3, 4})}, {{"dim", 1}, {"start", 2}, {"length", 3}}),
                  "do not select a non-empty range inside dim 1");
  EXPECT_CONTAINS(error_of("slice", {f32({3, 4})}, {{"dim", 1}, {"start", 3}, {"end", 1}}), "selects nothing");
  EXPECT_CONTAINS(error_of("expand", {f32({3, 2})}, {{"shape", {3, 4}}}), "only dims of size 1 can grow");
  EXPECT_CONTAINS(error_of("flatten", {f32({2, 3, 4})}, {{"start_dim", 2}, {"end_dim", 1}}), "comes after");
  EXPECT_CONTAINS(error_of("tril", {f32({4})}), "expected at least 2 dims");
  EXPECT_CONTAINS(error_of("repeat", {f32({2, 3})}, {{"repeats", {2}}}), "needs at least one entry per dim");
}

// ---- attrs ----

TEST(OpRegistryTest, ResolveAttrsFillsDefaultsAndRejectsUnknownOrIllTyped) {
  const OpSchema& conv = *op_registry().find("conv2d");
  json a = resolve_attrs(conv, {{"stride", 2}}, "here");
  EXPECT_EQ(a["stride"], 2);
  EXPECT_EQ(a["padding"], 0);
  EXPECT_EQ(a["groups"], 1);
  EXPECT_EQ(a["dilation"], 1);

  auto err = [](const OpSchema& s, const json& attrs) {
    try {
      resolve_attrs(s, attrs, "task 't': node 3 (conv2d)");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_CONTAINS(err(conv, {{"strides", 2}}),
                  "task 't': node 3 (conv2d): unknown attr \"strides\" (did you mean \"stride\"?); conv2d accepts: "
                  "\"stride\", \"padding\", \"groups\", \"dilation\"");
  EXPECT_CONTAINS(err(conv, {{"groups", "two"}}), "attr \"groups\" must be an integer, got a string \"two\"");
  EXPECT_CONTAINS(err(conv, {{"padding", {1, 1.5}}}), "attr \"padding\" must be an integer or a list of integers");
  EXPECT_CONTAINS(err(*op_registry().find("relu"), {{"inplace", true}}), "relu accepts: none");
  EXPECT_CONTAINS(err(conv, json::array()), "attrs must be an object");

  // ints are accepted where floats are expected; integral floats where ints are.
  const json lr = resolve_attrs(*op_registry().find("leaky_relu"), {{"negative_slope", 1}}, "");
  EXPECT_TRUE(lr["negative_slope"].is_number_float());
  const json sm = resolve_attrs(*op_registry().find("softmax"), {{"dim", 1.0}}, "");
  EXPECT_TRUE(sm["dim"].is_number_integer());
  EXPECT_CONTAINS(err(*op_registry().find("softmax"), {{"dim", 1.5}}), "attr \"dim\" must be an integer");
  // "number" attrs keep what was written, which decides integer promotion.
  const json add_int = resolve_attrs(*op_registry().find("add"), {{"other", 2}}, "");
  EXPECT_TRUE(add_int["other"].is_number_integer());
  EXPECT_TRUE(add_int["alpha"].is_number_integer());
  // Optional attrs resolve to null when absent.
  EXPECT_TRUE(resolve_attrs(*op_registry().find("sum"), json::object(), "")["dim"].is_null());
}

// ---- whole graphs ----

TaskSpec parse(const std::string& text) { return parse_task(Document::from_json_text(text, "task.json")); }

std::string graph_error(const std::string& text) {
  try {
    infer_graph(parse(text));
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no error>";
}

const char* kGemmGelu = R"({
  "id": "synth/0001a3f2",
  "inputs":  [{"name": "x", "shape": [4096, 1024], "dtype": "float32", "init": "normal"}],
  "params":  [{"name": "w", "shape": [1024, 1024], "dtype": "float32", "init": "kaiming_uniform"}],
  "nodes":   [{"op": "matmul", "in": ["x", "w"], "out": "t0"},
              {"op": "gelu",   "in": ["t0"],      "out": "t1", "attrs": {"approximate": "tanh"}},
              {"op": "add",    "in": ["t1", "x"], "out": "y"}],
  "outputs": ["y"]})";

TEST(OpRegistryTest, InferGraphTypesEveryValue) {
  const TaskSpec t = parse(kGemmGelu);
  const auto types = infer_graph(t);
  EXPECT_EQ(types.size(), 5u);
  EXPECT_EQ(types.at("t0").shape, (Shape{4096, 1024}));
  EXPECT_EQ(types.at("t0").name, "t0");
  const auto outs = infer_outputs(t);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].shape, (Shape{4096, 1024}));
  EXPECT_EQ(outs[0].dtype, DType::kFloat32);
}

TEST(OpRegistryTest, GraphErrorsNameTaskNodeAndOp) {
  std::string text = kGemmGelu;
  text.replace(text.find("[1024, 1024]"), 12, "[512, 1024]");
  EXPECT_CONTAINS(graph_error(text),
                  "task 'synth/0001a3f2': node 0 (matmul): inner dimensions differ: in[0] \"x\" has shape "
                  "[4096, 1024] and in[1] \"w\" has shape [512, 1024]; expected w of shape [1024, N]");

  text = kGemmGelu;
  text.replace(text.find("\"gelu\""), 6, "\"gelus\"");
  EXPECT_CONTAINS(graph_error(text),
                  "task 'synth/0001a3f2': node 1 (gelus): unknown op \"gelus\"; did you mean \"gelu\"?");

  text = kGemmGelu;
  text.replace(text.find("[\"t0\"]"), 6, "[\"t0\", \"x\"]");
  EXPECT_CONTAINS(graph_error(text), "node 1 (gelu): gelu takes 1 input, got 2");

  text = kGemmGelu;
  text.replace(text.find("[\"t1\", \"x\"]"), 11, "[\"t1\"]");
  EXPECT_CONTAINS(graph_error(text), "node 2 (add): needs a second input tensor or the scalar attr \"other\"");

  text = kGemmGelu;
  text.replace(text.find("\"tanh\""), 6, "\"tanhh\"");
  EXPECT_CONTAINS(graph_error(text), "node 1 (gelu): attr \"approximate\" must be one of \"none\", \"tanh\"");

  EXPECT_CONTAINS(error_of("linear", {f32({2, 3})}), "linear takes 2 to 3 inputs, got 1");
  EXPECT_CONTAINS(error_of("where", {f32({2, 3})}), "where takes 3 inputs, got 1");
}

TEST(OpRegistryTest, InferGraphRejectsUndefinedValuesInHandBuiltTasks) {
  TaskSpec t = parse(kGemmGelu);
  t.nodes[2].in[1] = "nope";
  try {
    infer_graph(t);
    ADD_FAILURE() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "node 2 (add): input \"nope\" is not an input, a param or the output of an earlier node");
  }
  t = parse(kGemmGelu);
  t.outputs = {"zz"};
  try {
    infer_graph(t);
    ADD_FAILURE() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "output \"zz\" is not produced by any node");
  }
}

TEST(OpRegistryTest, EstimateWorkCountsUnavoidableBytesAndFlops) {
  const WorkEstimate w = estimate_work(parse(kGemmGelu));
  const double m = 4096, k = 1024, n = 1024;
  EXPECT_DOUBLE_EQ(w.bytes, (m * k + k * n + m * n) * 4);
  // 2*M*N*K for the GEMM, then ~10 flops per element for gelu and 1 for add.
  EXPECT_DOUBLE_EQ(w.flops, 2 * m * n * k + 10 * m * n + m * n);

  TaskSpec conv = parse(R"({"id": "c", "inputs": [{"name": "x", "shape": [8, 16, 32, 32], "dtype": "float16"}],
    "params": [{"name": "w", "shape": [32, 8, 3, 3], "dtype": "float16"}],
    "nodes": [{"op": "conv2d", "in": ["x", "w"], "out": "y", "attrs": {"groups": 2, "padding": 1}}],
    "outputs": ["y"]})");
  const WorkEstimate cw = estimate_work(conv);
  const double out_numel = 8.0 * 32 * 32 * 32;
  EXPECT_DOUBLE_EQ(cw.flops, 2 * out_numel * 8 * 9);
  EXPECT_DOUBLE_EQ(cw.bytes, (8.0 * 16 * 32 * 32 + 32 * 8 * 9 + out_numel) * 2);
}

TEST(OpRegistryTest, PythonSpellingUsesTorchNames) {
  auto py = [](const std::string& op, const std::vector<TensorType>& in, json attrs) {
    const OpSchema& s = *op_registry().find(op);
    std::vector<std::string> args;
    for (size_t i = 0; i < in.size(); ++i) args.push_back("a" + std::to_string(i));
    return s.python(args, in, resolve_attrs(s, attrs, ""));
  };
  EXPECT_EQ(py("gelu", {f32({4})}, {{"approximate", "tanh"}}), "F.gelu(a0, approximate='tanh')");
  EXPECT_EQ(py("mul", {f32({4})}, {{"other", 2.0}}), "torch.mul(a0, 2.0)");
  EXPECT_EQ(py("add", {f32({4}), f32({4})}, {{"alpha", 0.5}}), "torch.add(a0, a1, alpha=0.5)");
  EXPECT_EQ(py("conv2d", {f32({1, 3, 8, 8}), f32({4, 3, 3, 3})}, {{"stride", {2, 1}}}),
            "F.conv2d(a0, a1, None, stride=[2, 1], padding=0, groups=1, dilation=1)");
  EXPECT_EQ(py("sum", {f32({3, 4})}, {{"dim", 1}, {"keepdim", true}}), "torch.sum(a0, dim=1, keepdim=True)");
  EXPECT_EQ(py("layer_norm", {f32({3, 4})}, json::object()), "F.layer_norm(a0, a0.shape[-1:], None, None, eps=1e-05)");
  EXPECT_EQ(py("slice", {f32({3, 10})}, {{"dim", -1}, {"start", 2}, {"step", 3}}), "a0[:, 2::3]");
}

TEST(OpRegistryTest, DocsListEveryOp) {
  const std::string doc = read_text_file(std::string(KFORGE_SOURCE_DIR) + "/docs/ops.md");
  for (const auto& name : op_registry().names()) {
    EXPECT_NE(doc.find("| `" + name + "` |"), std::string::npos) << "docs/ops.md has no row for " << name;
  }
}

}  // namespace
}  // namespace kforge
