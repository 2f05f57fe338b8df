#include <gtest/gtest.h>

#include <stdexcept>

#include "kforge/env/analysis.h"

namespace kforge::env {
namespace {

// A plugin tool, defined outside the library: registering the class is all it
// takes for the environment to offer it.
class EchoTool : public AnalysisTool {
 public:
  std::string name() const override { return "echo_test_tool"; }
  std::string description() const override { return "Echoes its argument (test plugin)."; }
  json parameters() const override {
    return {{"type", "object"},
            {"properties", {{"word", {{"type", "string"}, {"description", "What to echo."}}}}},
            {"required", json::array({"word"})},
            {"additionalProperties", false}};
  }
  std::vector<SolutionMode> modes() const override { return {SolutionMode::kCpp, SolutionMode::kCuda}; }
  void validate_args(const json& args) const override { word(args); }
  AnalysisResult run(const AnalysisInput& input) const override {
    AnalysisResult r;
    r.ok = true;
    r.facts = {{"word", word(input.args)}};
    r.text = "echo: " + word(input.args);
    r.hints = {"say it again"};
    return r;
  }

 private:
  static std::string word(const json& args) {
    const Document doc = Document::from_value(args, "echo_test_tool arguments");
    ObjectReader r = doc.root_object();
    std::string w = r.required("word").as_string();
    r.finish();
    return w;
  }
};

KFORGE_REGISTER_ANALYSIS_TOOL(EchoTool);

// Produces long text and throws on request, to test the registry's envelope.
class LoudTool : public AnalysisTool {
 public:
  explicit LoudTool(std::string name = "loud_tool") : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::string description() const override { return "Talks too much."; }
  json parameters() const override {
    return {{"type", "object"},
            {"properties", {{"throw", {{"type", "boolean"}, {"description", "Throw instead."}}}}},
            {"additionalProperties", false}};
  }
  std::vector<SolutionMode> modes() const override { return {SolutionMode::kCuda}; }
  void validate_args(const json&) const override {}
  AnalysisResult run(const AnalysisInput& input) const override {
    if (input.args.value("throw", false)) throw std::out_of_range("boom");
    AnalysisResult r;
    r.ok = true;
    for (int i = 0; i < 1000; ++i) r.text += "line " + std::to_string(i) + " of a very long report\n";
    r.hints = {"the one hint that matters"};
    return r;
  }

 private:
  std::string name_;
};

std::string error_of(const AnalysisRegistry& reg, const std::string& tool, const json& args) {
  AnalysisInput in;
  in.args = args;
  const AnalysisResult r = reg.run(tool, in);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.text, tool + ": " + r.error);
  return r.error;
}

TEST(AnalysisRegistryTest, BuiltinTools) {
  auto reg = AnalysisRegistry::with_builtin_tools();
  EXPECT_EQ(reg->names(), (std::vector<std::string>{"occupancy", "resource_usage", "sass_mix"}));
  EXPECT_EQ(reg->definitions(SolutionMode::kCuda).size(), 3u);
  EXPECT_EQ(reg->definitions(SolutionMode::kNvrtc).size(), 3u);
  EXPECT_TRUE(reg->definitions(SolutionMode::kCpp).empty());
}

TEST(AnalysisRegistryTest, UnknownToolSuggestsTheClosestAndListsAll) {
  auto reg = AnalysisRegistry::with_builtin_tools();
  const std::string err = error_of(*reg, "sass_mx", json::object());
  EXPECT_NE(err.find("unknown analysis tool \"sass_mx\""), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean \"sass_mix\"?"), std::string::npos) << err;
  EXPECT_NE(err.find("available tools: occupancy, resource_usage, sass_mix"), std::string::npos) << err;
  const std::string far = error_of(*reg, "flamegraph", json::object());
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

TEST(AnalysisRegistryTest, BadArgumentsNameTheField) {
  auto reg = AnalysisRegistry::with_builtin_tools();
  std::string err = error_of(*reg, "sass_mix", {{"top", "many"}});
  EXPECT_NE(err.find("bad arguments: sass_mix arguments: field /top: expected an integer"), std::string::npos) << err;
  err = error_of(*reg, "sass_mix", {{"top", 500}});
  EXPECT_NE(err.find("[1, 50]"), std::string::npos) << err;
  err = error_of(*reg, "occupancy", {{"kernal", "k"}, {"block_size", 128}});
  EXPECT_NE(err.find("unknown key \"kernal\" (did you mean \"kernel\"?)"), std::string::npos) << err;
  err = error_of(*reg, "occupancy", {{"block_size", json::array({32, 32, 2})}});
  EXPECT_NE(err.find("exceeds 1024"), std::string::npos) << err;
  err = error_of(*reg, "resource_usage", json::array({1}));
  EXPECT_NE(err.find("expected an object"), std::string::npos) << err;
}

TEST(AnalysisRegistryTest, ToolsNeedACompiledSolutionAndTheRightMode) {
  auto reg = AnalysisRegistry::with_builtin_tools();
  AnalysisInput in;
  AnalysisResult r = reg->run("sass_mix", in);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("compile one first"), std::string::npos) << r.error;

  Solution cpp;
  cpp.mode = SolutionMode::kCpp;
  in.solution = &cpp;
  r = reg->run("resource_usage", in);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("does not apply to cpp solutions (it applies to: cuda, nvrtc, torch_ext)"), std::string::npos)
      << r.error;
}

// Sample arguments built from a schema, so that each property the schema
// advertises is known to be accepted by the tool's own argument reader.
json sample_of(const json& schema) {
  if (schema.contains("anyOf")) return sample_of(schema["anyOf"][0]);
  const std::string type = schema.value("type", "");
  if (type == "integer") return schema.value("minimum", 1);
  if (type == "number") return schema.value("minimum", 1.0);
  if (type == "string") return schema.contains("enum") ? schema["enum"][0] : json("x");
  if (type == "boolean") return true;
  if (type == "array") return json::array({sample_of(schema["items"])});
  return json::object();
}

TEST(AnalysisRegistryTest, EverySchemaIsCompleteAndMatchesItsArgumentReader) {
  auto reg = AnalysisRegistry::with_builtin_tools();
  for (const json& def : reg->definitions()) {
    ASSERT_EQ(def["type"], "function");
    const json& fn = def["function"];
    const std::string name = fn["name"];
    SCOPED_TRACE(name);
    EXPECT_GT(fn["description"].get<std::string>().size(), 80u);
    const json& params = fn["parameters"];
    EXPECT_EQ(params["type"], "object");
    EXPECT_EQ(params["additionalProperties"], false);
    ASSERT_TRUE(params["properties"].is_object());
    EXPECT_FALSE(params["properties"].empty());
    const auto tool = reg->find(name);
    ASSERT_NE(tool, nullptr);
    json all = json::object();
    for (auto it = params["properties"].begin(); it != params["properties"].end(); ++it) {
      SCOPED_TRACE(it.key());
      EXPECT_FALSE(it.value().value("description", "").empty());
      const json one = {{it.key(), sample_of(it.value())}};
      EXPECT_NO_THROW(tool->validate_args(one)) << one.dump();
      all[it.key()] = one[it.key()];
    }
    EXPECT_NO_THROW(tool->validate_args(all)) << all.dump();
    EXPECT_THROW(tool->validate_args({{"not_a_parameter", 1}}), InputError);
  }
}

TEST(AnalysisRegistryTest, PluginsRegisterWithoutTouchingTheEnvironment) {
  ASSERT_TRUE(AnalysisRegistry::global().contains("echo_test_tool"));
  EXPECT_TRUE(AnalysisRegistry::global().contains("sass_mix"));
  AnalysisInput in;
  in.args = {{"word", "hello"}};
  const AnalysisResult r = AnalysisRegistry::global().run("echo_test_tool", in);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.tool, "echo_test_tool");
  EXPECT_EQ(r.facts["word"], "hello");
  EXPECT_EQ(r.text, "echo: hello\nHints:\n- say it again");
  EXPECT_EQ(AnalysisRegistry::global().definitions(SolutionMode::kCpp).size(), 1u);

  const std::string err = error_of(AnalysisRegistry::global(), "echo_test_tool", json::object());
  EXPECT_NE(err.find("missing required key \"word\""), std::string::npos) << err;
}

TEST(AnalysisRegistryTest, AddRejectsBadNames) {
  AnalysisRegistry reg;
  reg.add(std::make_shared<LoudTool>());
  EXPECT_THROW(reg.add(std::make_shared<LoudTool>()), std::invalid_argument);
  EXPECT_THROW(reg.add(std::make_shared<LoudTool>("profile")), std::invalid_argument);
  EXPECT_THROW(reg.add(std::make_shared<LoudTool>("Bad-Name")), std::invalid_argument);
  EXPECT_THROW(reg.add(nullptr), std::invalid_argument);
  EXPECT_EQ(reg.names(), std::vector<std::string>{"loud_tool"});
}

TEST(AnalysisRegistryTest, LongTextIsCutButHintsStay) {
  AnalysisRegistry reg;
  reg.add(std::make_shared<LoudTool>());
  AnalysisInput in;
  in.config.max_text_chars = 1000;
  const AnalysisResult r = reg.run("loud_tool", in);
  ASSERT_TRUE(r.ok);
  EXPECT_LE(r.text.size(), 1000u);
  EXPECT_NE(r.text.find("(cut; every value is in the facts)"), std::string::npos);
  EXPECT_NE(r.text.find("- the one hint that matters"), std::string::npos) << r.text;
}

TEST(AnalysisRegistryTest, ExceptionsBecomeErrors) {
  AnalysisRegistry reg;
  reg.add(std::make_shared<LoudTool>());
  const std::string err = error_of(reg, "loud_tool", {{"throw", true}});
  EXPECT_EQ(err, "internal error: boom");
}

TEST(AnalysisRegistryTest, ResultRoundTripsThroughJson) {
  AnalysisResult r;
  r.tool = "sass_mix";
  r.ok = false;
  r.error = "cuobjdump not found on this machine";
  r.text = "sass_mix: " + r.error;
  const AnalysisResult back = analysis_result_from_json(to_json(r));
  EXPECT_EQ(back.tool, r.tool);
  EXPECT_FALSE(back.ok);
  EXPECT_EQ(back.error, r.error);
  EXPECT_EQ(back.text, r.text);
  EXPECT_THROW(analysis_result_from_json({{"tool", "x"}}), InputError);
}

TEST(DevicePropertiesTest, JsonRoundTripAndValidation) {
  DeviceProperties d = DeviceProperties::h200();
  d.shared_bytes_per_sm = 233472;
  const Document doc = Document::from_value(to_json(d), "device");
  const DeviceProperties back = parse_device_properties(Field(doc, doc.root, ""));
  EXPECT_EQ(back.arch, "sm_90a");
  EXPECT_EQ(back.sm_count, 132);
  EXPECT_EQ(back.shared_bytes_per_sm, 233472);
  EXPECT_EQ(back.l2_bytes, 62914560);
  const Document bad = Document::from_value({{"arch", "90"}}, "device");
  EXPECT_THROW(parse_device_properties(Field(bad, bad.root, "")), InputError);
}

}  // namespace
}  // namespace kforge::env
