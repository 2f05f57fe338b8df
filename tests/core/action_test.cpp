#include "kforge/core/action.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

TEST(ActionTest, ToolCallWithStringArguments) {
  json call = {{"name", "profile"}, {"arguments", R"({"source": "int x;", "mode": "cpp"})"}};
  Action a = parse_tool_call(call, SolutionMode::kCuda);
  EXPECT_EQ(a.type, ActionType::kProfile);
  ASSERT_TRUE(a.solution.has_value());
  EXPECT_EQ(a.solution->mode, SolutionMode::kCpp);
  EXPECT_EQ(a.solution->source, "int x;");
}

TEST(ActionTest, OpenAIEnvelopeAndDefaultMode) {
  json call = {
      {"id", "call_1"}, {"type", "function"}, {"function", {{"name", "compile"}, {"arguments", R"({"source": "k"})"}}}};
  Action a = parse_tool_call(call, SolutionMode::kCpp);
  EXPECT_EQ(a.type, ActionType::kCompile);
  EXPECT_EQ(a.solution->mode, SolutionMode::kCpp);
}

TEST(ActionTest, SubmitWithoutSourceRefersToLastSolution) {
  Action a = parse_tool_call({{"name", "submit"}, {"arguments", "{}"}}, SolutionMode::kCuda);
  EXPECT_EQ(a.type, ActionType::kSubmit);
  EXPECT_FALSE(a.solution.has_value());
}

TEST(ActionTest, UnknownArgumentIsRejected) {
  try {
    parse_tool_call({{"name", "verify"}, {"arguments", R"({"sorce": "x"})"}}, SolutionMode::kCuda);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean \"source\""), std::string::npos) << e.what();
  }
}

TEST(ActionTest, MalformedArgumentsJson) {
  try {
    parse_tool_call({{"name", "verify"}, {"arguments", "{not json"}}, SolutionMode::kCuda);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(ActionTest, OtherNamesAreAnalysisTools) {
  Action a = parse_tool_call({{"name", "resource_usage"}, {"arguments", R"({"kernel": "k"})"}}, SolutionMode::kCuda);
  EXPECT_EQ(a.type, ActionType::kAnalyze);
  EXPECT_EQ(a.tool, "resource_usage");
  EXPECT_EQ(a.tool_args["kernel"], "k");
}

TEST(ActionTest, ActionDocumentRoundTrip) {
  Action a;
  a.type = ActionType::kVerify;
  Solution s;
  s.mode = SolutionMode::kCpp;
  s.source = "src";
  a.solution = s;
  Action b = parse_action(Document::from_value(to_json(a), "<a>"));
  EXPECT_EQ(to_json(a), to_json(b));
}

}  // namespace
}  // namespace kforge
