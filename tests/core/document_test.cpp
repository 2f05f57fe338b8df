#include "kforge/core/document.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(DocumentTest, YamlScalarsResolveToJsonTypes) {
  Document d = Document::from_yaml_text("a: 3\nb: 1e-2\nc: true\nd: \"3\"\ne: hello\nf: ~\n", "t.yaml");
  EXPECT_TRUE(d.root["a"].is_number_integer());
  EXPECT_DOUBLE_EQ(d.root["b"].get<double>(), 0.01);
  EXPECT_TRUE(d.root["c"].get<bool>());
  EXPECT_EQ(d.root["d"], "3");
  EXPECT_EQ(d.root["e"], "hello");
  EXPECT_TRUE(d.root["f"].is_null());
}

TEST(DocumentTest, YamlErrorsNameLineAndField) {
  Document d = Document::from_yaml_text("name: x\nshape:\n  - 4\n  - -2\n", "cfg.yaml");
  std::string err = error_of([&] { d.root_object().required("shape").as_shape(); });
  EXPECT_NE(err.find("cfg.yaml:4:"), std::string::npos) << err;
  EXPECT_NE(err.find("/shape/1"), std::string::npos) << err;
  EXPECT_NE(err.find("positive integer"), std::string::npos) << err;
}

TEST(DocumentTest, UnknownKeyIsRejectedWithSuggestion) {
  Document d = Document::from_json_text(R"({"name": "x", "sahpe": [1]})", "t.json");
  std::string err = error_of([&] {
    ObjectReader r = d.root_object();
    r.required("name");
    r.optional("shape");
    r.finish();
  });
  EXPECT_NE(err.find("unknown key \"sahpe\""), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean \"shape\""), std::string::npos) << err;
  EXPECT_NE(err.find("t.json"), std::string::npos) << err;
}

TEST(DocumentTest, JsonSyntaxErrorHasLineAndColumn) {
  std::string err = error_of([] { Document::from_json_text("{\n  \"a\": 1,\n  \"b\": }\n", "bad.json"); });
  EXPECT_NE(err.find("bad.json:3:"), std::string::npos) << err;
  EXPECT_NE(err.find("invalid JSON"), std::string::npos) << err;
}

TEST(DocumentTest, YamlSyntaxErrorHasLine) {
  std::string err = error_of([] { Document::from_yaml_text("a: [1, 2\nb: 3\n", "bad.yaml"); });
  EXPECT_NE(err.find("bad.yaml:"), std::string::npos) << err;
  EXPECT_NE(err.find("invalid YAML"), std::string::npos) << err;
}

TEST(DocumentTest, DuplicateYamlKeyIsAnError) {
  std::string err = error_of([] { Document::from_yaml_text("a: 1\na: 2\n", "dup.yaml"); });
  EXPECT_NE(err.find("duplicate key 'a'"), std::string::npos) << err;
}

TEST(DocumentTest, EnumErrorListsChoices) {
  Document d = Document::from_json_text(R"({"mode": "cdua"})", "s.json");
  std::string err = error_of([&] { d.root_object().required("mode").as_enum({"cuda", "nvrtc"}); });
  EXPECT_NE(err.find("did you mean \"cuda\""), std::string::npos) << err;
}

TEST(DocumentTest, MissingFileIsAClearError) {
  std::string err = error_of([] { Document::from_file("/nonexistent/task.json"); });
  EXPECT_NE(err.find("no such file"), std::string::npos) << err;
}

}  // namespace
}  // namespace kforge
