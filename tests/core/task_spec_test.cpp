#include "kforge/core/task_spec.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

const char* kTask = R"({
  "id": "user/gemm_gelu", "source": "user",
  "inputs": [{"name": "x", "shape": [64, 32], "dtype": "float32", "init": "normal"}],
  "params": [{"name": "w", "shape": [32, 16], "init": "kaiming_uniform"}],
  "nodes": [{"op": "matmul", "in": ["x", "w"], "out": "t0"},
            {"op": "gelu", "in": ["t0"], "out": "y", "attrs": {"approximate": "tanh"}}],
  "outputs": ["y"],
  "shape_variants": [{"x": [128, 32]}],
  "tolerance": {"atol": 1e-3, "rtol": 1e-3},
  "baselines": {"device": "NVIDIA H200", "eager_ms": 0.41, "compile_ms": 0.33}
})";

std::string error_of(const std::string& text) {
  try {
    parse_task(Document::from_json_text(text, "task.json"));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TaskSpecTest, ParsesAndRoundTrips) {
  TaskSpec t = parse_task(Document::from_json_text(kTask, "task.json"));
  EXPECT_EQ(t.id, "user/gemm_gelu");
  ASSERT_EQ(t.kernel_inputs().size(), 2u);
  EXPECT_EQ(t.kernel_inputs()[1].name, "w");
  EXPECT_EQ(t.nodes[1].attrs["approximate"], "tanh");
  ASSERT_EQ(t.shape_variants.size(), 1u);
  EXPECT_EQ(t.with_variant(0).inputs[0].shape, (std::vector<int64_t>{128, 32}));
  EXPECT_EQ(*t.baselines->eager_ms, 0.41);
  TaskSpec again = parse_task(Document::from_value(to_json(t), "roundtrip"));
  EXPECT_EQ(to_json(again), to_json(t));
}

TEST(TaskSpecTest, MetaIsAnObjectThatRoundTrips) {
  std::string text = kTask;
  text.replace(text.rfind('}'), 1, R"(, "meta": {"nearest_kernelbench": {"problem": "level2/12", "distance": 0.5}}})");
  TaskSpec t = parse_task(Document::from_json_text(text, "task.json"));
  EXPECT_EQ(t.meta["nearest_kernelbench"]["problem"], "level2/12");
  EXPECT_EQ(to_json(parse_task(Document::from_value(to_json(t), "again"))), to_json(t));

  std::string not_object = kTask;
  not_object.replace(not_object.rfind('}'), 1, R"(, "meta": [1, 2]})");
  EXPECT_NE(error_of(not_object).find("/meta"), std::string::npos) << error_of(not_object);

  std::string huge = kTask;
  huge.replace(huge.rfind('}'), 1, R"(, "meta": {"blob": ")" + std::string(kMaxTaskMetaBytes, 'a') + "\"}}");
  const std::string err = error_of(huge);
  EXPECT_NE(err.find("/meta"), std::string::npos) << err.substr(0, 200);
  EXPECT_NE(err.find("at most 65536"), std::string::npos) << err.substr(0, 200);
}

TEST(TaskSpecTest, UndefinedNodeInputIsNamed) {
  std::string text = kTask;
  text.replace(text.find("[\"x\", \"w\"]"), 10, "[\"x\", \"v\"]");
  std::string err = error_of(text);
  EXPECT_NE(err.find("/nodes/0/in/1"), std::string::npos) << err;
  EXPECT_NE(err.find("\"v\" is not an input"), std::string::npos) << err;
}

TEST(TaskSpecTest, OutputMustBeProduced) {
  std::string text = kTask;
  text.replace(text.find("\"outputs\": [\"y\"]"), 16, "\"outputs\": [\"z\"]");
  EXPECT_NE(error_of(text).find("\"z\" is not the output of any node"), std::string::npos);
}

TEST(TaskSpecTest, VariantMayOnlyNameInputs) {
  std::string text = kTask;
  text.replace(text.find("{\"x\": [128, 32]}"), 16, "{\"w\": [128, 32]}");
  EXPECT_NE(error_of(text).find("not an input of the task"), std::string::npos);
}

TEST(TaskSpecTest, RejectsBadShapeAndDtype) {
  std::string text = kTask;
  text.replace(text.find("[64, 32]"), 8, "[64, 0] ");
  EXPECT_NE(error_of(text).find("/inputs/0/shape/1"), std::string::npos);
  text = kTask;
  text.replace(text.find("\"float32\""), 9, "\"flaot32\"");
  std::string err = error_of(text);
  EXPECT_NE(err.find("did you mean \"float32\""), std::string::npos) << err;
}

TEST(TaskSpecTest, DuplicateNamesAreRejected) {
  std::string text = kTask;
  text.replace(text.find("\"out\": \"t0\""), 11, "\"out\": \"x\" ");
  EXPECT_NE(error_of(text).find("already defined"), std::string::npos);
}

TEST(TaskSpecTest, UnknownTopLevelKey) {
  std::string text = kTask;
  text.replace(text.find("\"source\""), 8, "\"sorce\"  ");
  std::string err = error_of(text);
  EXPECT_NE(err.find("unknown key \"sorce\""), std::string::npos) << err;
}

TEST(TaskSpecTest, YamlTaskErrorsCarryLines) {
  const char* yaml =
      "id: t\n"
      "inputs:\n"
      "  - name: x\n"
      "    shape: [4, 4]\n"
      "    init: gaussian\n"
      "nodes:\n"
      "  - {op: relu, in: [x], out: y}\n"
      "outputs: [y]\n";
  try {
    parse_task(Document::from_yaml_text(yaml, "t.yaml"));
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    std::string err = e.what();
    EXPECT_NE(err.find("t.yaml:5:"), std::string::npos) << err;
    EXPECT_NE(err.find("/inputs/0/init"), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace kforge
