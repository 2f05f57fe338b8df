#include "kforge/env/tools.h"

#include <gtest/gtest.h>

namespace kforge::env {
namespace {

Toolset cpu_tools() { return Toolset({SolutionMode::kCpp}, SolutionMode::kCpp); }

std::string decode_error(const Toolset& t, const json& call) {
  try {
    t.decode(call);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ToolsTest, DefinitionsAreOpenAiFunctions) {
  const Toolset t = cpu_tools();
  EXPECT_EQ(t.names(), (std::vector<std::string>{"compile", "verify", "profile", "submit"}));
  for (const auto& d : t.definitions()) {
    EXPECT_EQ(d["type"], "function");
    const json& fn = d["function"];
    EXPECT_FALSE(fn["description"].get<std::string>().empty());
    EXPECT_EQ(fn["parameters"]["type"], "object");
    EXPECT_EQ(fn["parameters"]["properties"]["source"]["type"], "string");
    // One mode: nothing to choose, so no "mode" to get wrong.
    EXPECT_FALSE(fn["parameters"]["properties"].contains("mode"));
  }
}

TEST(ToolsTest, SeveralModesAreOfferedAsAnEnum) {
  const Toolset t({SolutionMode::kCuda, SolutionMode::kNvrtc}, SolutionMode::kCuda);
  const json& props = t.definitions()[0]["function"]["parameters"]["properties"];
  EXPECT_EQ(props["mode"]["enum"], (json{"cuda", "nvrtc"}));
  EXPECT_TRUE(props.contains("launch"));
}

TEST(ToolsTest, DecodesCallsInEveryShape) {
  const Toolset t = cpu_tools();
  Action a = t.decode({{"name", "verify"}, {"arguments", R"({"source": "int kf;"})"}});
  EXPECT_EQ(a.type, ActionType::kVerify);
  ASSERT_TRUE(a.solution);
  EXPECT_EQ(a.solution->source, "int kf;");
  EXPECT_EQ(a.solution->mode, SolutionMode::kCpp);

  a = t.decode({{"type", "function"}, {"id", "call_1"}, {"function", {{"name", "submit"}, {"arguments", "{}"}}}});
  EXPECT_EQ(a.type, ActionType::kSubmit);
  EXPECT_FALSE(a.solution);

  a = t.decode(json(R"({"name": "profile"})"));  // raw text of the call
  EXPECT_EQ(a.type, ActionType::kProfile);
}

TEST(ToolsTest, MalformedCallsExplainThemselves) {
  const Toolset t = cpu_tools();
  std::string msg = decode_error(t, {{"name", "verify"}, {"arguments", "{\"source\": \"int x;"}});
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("<tool call"), std::string::npos) << msg;

  msg = decode_error(t, {{"name", "compiel"}, {"arguments", json::object()}});
  EXPECT_NE(msg.find("did you mean \"compile\""), std::string::npos) << msg;

  msg = decode_error(t, {{"name", "compile"}, {"arguments", {{"source", "x"}, {"mode", "cuda"}}}});
  EXPECT_NE(msg.find("not available"), std::string::npos) << msg;

  msg = decode_error(t, {{"name", "verify"}, {"arguments", {{"source", "   "}}}});
  EXPECT_NE(msg.find("non-empty"), std::string::npos) << msg;

  msg = decode_error(t, json("verify my code please"));
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;

  msg = decode_error(t, json::array());
  EXPECT_NE(msg.find("JSON object"), std::string::npos) << msg;
}

TEST(ToolsTest, HostileCallTextIsAnInputErrorNamingTheLimit) {
  const Toolset tools({SolutionMode::kCpp}, SolutionMode::kCpp, {});
  std::string deep(200000, '[');
  deep += std::string(200000, ']');
  // The raw text of a call, and the arguments string of one.
  for (const json& call : {json(deep), json{{"name", "compile"}, {"arguments", deep}}}) {
    std::string msg;
    try {
      tools.decode(call);
    } catch (const InputError& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("nested deeper than 64 levels"), std::string::npos) << msg;
  }
  std::string msg;
  try {
    tools.decode(json(std::string(1 << 20, 'x')));  // a megabyte that is no JSON and no tool
  } catch (const InputError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("the tool call is not valid JSON"), std::string::npos) << msg;
}

TEST(ToolsTest, AnalysisToolsAreFunctionsOfTheirOwn) {
  AnalysisToolInfo info;
  info.name = "occupancy";
  info.description = "Theoretical occupancy of each kernel.";
  info.parameters = {{"type", "object"},
                     {"properties", {{"block_size", {{"type", "integer"}, {"description", "threads"}}}}}};
  const Toolset t({SolutionMode::kCuda}, SolutionMode::kCuda, {info});
  EXPECT_EQ(t.names().back(), "occupancy");
  EXPECT_EQ(t.definitions().back()["function"]["parameters"], info.parameters);

  const Action a = t.decode({{"name", "occupancy"}, {"arguments", {{"block_size", 256}}}});
  EXPECT_EQ(a.type, ActionType::kAnalyze);
  EXPECT_EQ(a.tool, "occupancy");
  EXPECT_EQ(a.tool_args["block_size"], 256);

  // The generic form, with a tool the set does not offer.
  const std::string msg = decode_error(t, {{"name", "analyze"}, {"arguments", {{"tool", "occupancyy"}}}});
  EXPECT_NE(msg.find("did you mean \"occupancy\""), std::string::npos) << msg;
}

}  // namespace
}  // namespace kforge::env
