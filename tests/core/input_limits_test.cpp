// Hostile documents and tasks (docs/threat-model.md#outside-input): every one is refused with an
// InputError that names where and which limit, never a crash or a hang.
#include "kforge/core/input_limits.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "kforge/core/action.h"
#include "kforge/core/document.h"
#include "kforge/core/op_registry.h"
#include "kforge/core/remove_tree.h"
#include "kforge/core/task_set.h"
#include "kforge/core/task_spec.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string nested_arrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// A scratch directory removed with the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kforge-limits-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { kforge::remove_tree(path_); }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
    return path_ / name;
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// ---- documents ----

TEST(DocumentLimitsTest, DeepJsonIsRefusedNotRecursedInto) {
  const std::string err = error_of([] { Document::from_json_text(nested_arrays(200000), "deep.json"); });
  EXPECT_TRUE(contains(err, "deep.json")) << err;
  EXPECT_TRUE(contains(err, "nested deeper than 64 levels (limits::kMaxDocumentDepth)")) << err;
}

TEST(DocumentLimitsTest, JsonAtTheDepthLimitIsAccepted) {
  EXPECT_NO_THROW(Document::from_json_text(nested_arrays(limits::kMaxDocumentDepth), "ok.json"));
  EXPECT_TRUE(contains(error_of([] { Document::from_json_text(nested_arrays(limits::kMaxDocumentDepth + 1), "x"); }),
                       "nested deeper"));
}

TEST(DocumentLimitsTest, DeepYamlIsRefused) {
  const std::string err = error_of([] { Document::from_yaml_text(nested_arrays(100000), "deep.yaml"); });
  EXPECT_TRUE(contains(err, "deep.yaml:1:")) << err;
  EXPECT_TRUE(contains(err, "nested")) << err;
}

TEST(DocumentLimitsTest, DuplicateJsonKeyIsAnErrorNamingTheObject) {
  const std::string err =
      error_of([] { Document::from_json_text(R"({"nodes": [{"op": "relu", "op": "gelu"}]})", "dup.json"); });
  EXPECT_TRUE(contains(err, "dup.json: field /nodes/0: duplicate key \"op\"")) << err;
  // Top level too.
  EXPECT_TRUE(contains(error_of([] { Document::from_json_text(R"({"id": "a", "id": "b"})", "t.json"); }),
                       "field /: duplicate key \"id\""));
}

TEST(DocumentLimitsTest, BillionLaughsIsRefusedByTheExpansionCap) {
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    yaml += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) yaml += std::string(k ? ", " : "") + "*a" + std::to_string(i - 1);
    yaml += "]\n";
  }
  const std::string err = error_of([&] { Document::from_yaml_text(yaml, "laughs.yaml"); });
  EXPECT_TRUE(contains(err, "laughs.yaml:")) << err;
  EXPECT_TRUE(contains(err, "expands to more than 1000000 values (limits::kMaxDocumentValues")) << err;
}

TEST(DocumentLimitsTest, AliasesWithinTheCapStillWork) {
  Document d = Document::from_yaml_text("base: &b {atol: 0.1}\ncopy: *b\n", "a.yaml");
  EXPECT_EQ(d.root["copy"]["atol"], 0.1);
}

TEST(DocumentLimitsTest, AnAliasCannotNestPastTheDepthLimit) {
  // The anchored value is 40 deep; placed 40 deep it would be 80.
  std::string inner = nested_arrays(40);
  std::string yaml = "a: &x " + inner + "\nb: " + std::string(40, '[') + "*x" + std::string(40, ']') + "\n";
  EXPECT_TRUE(contains(error_of([&] { Document::from_yaml_text(yaml, "alias.yaml"); }), "nested deeper than 64"));
}

TEST(DocumentLimitsTest, FromValueAppliesTheSameDepthLimit) {
  json deep = json::array();
  for (int i = 0; i < 100; ++i) deep = json::array({deep});
  const std::string err = error_of([&] { Document::from_value(deep, "<wire task>"); });
  EXPECT_TRUE(contains(err, "<wire task>: nested deeper than 64 levels")) << err;
}

TEST(DocumentLimitsTest, DevZeroReturnsAtOnce) {
  // No document extension: refused before it is opened.
  const std::string err = error_of([] { Document::from_file("/dev/zero"); });
  EXPECT_TRUE(contains(err, "/dev/zero: unknown file type")) << err;
  // Under a .json name it is read only up to the limit.
  TempDir dir;
  fs::create_symlink("/dev/zero", dir.path() / "zero.json");
  const std::string err2 = error_of([&] { Document::from_file(dir.path() / "zero.json"); });
  EXPECT_TRUE(contains(err2, "more than the limit of 16777216 bytes")) << err2;
  const std::string err3 = error_of([] { read_text_file("/dev/zero", 1024); });
  EXPECT_TRUE(contains(err3, "more than the limit of 1024 bytes")) << err3;
}

TEST(DocumentLimitsTest, OversizeFileIsRefusedBeforeItIsRead) {
  TempDir dir;
  const fs::path big = dir.write("big.json", "");
  fs::resize_file(big, limits::kMaxDocumentBytes + 1);  // sparse: nothing to read
  const std::string err = error_of([&] { Document::from_file(big); });
  EXPECT_TRUE(contains(err, "16777217 bytes is more than the limit of 16777216 bytes")) << err;
}

TEST(DocumentLimitsTest, DirectoryIsNotReadAsAFile) {
  TempDir dir;
  fs::create_directory(dir.path() / "d.json");
  EXPECT_TRUE(contains(error_of([&] { Document::from_file(dir.path() / "d.json"); }), "is a directory"));
}

TEST(DocumentLimitsTest, InvalidUtf8InYamlIsDescribedNotThrown) {
  Document d = Document::from_yaml_text("id: \"\xff\xfe\"\n", "u.yaml");
  const std::string err = error_of([&] { d.root_object().required("id").as_int(); });
  EXPECT_TRUE(contains(err, "field /id: expected an integer")) << err;
}

TEST(DocumentLimitsTest, ClosestMatchIgnoresHugeWords) {
  const std::string word(1 << 20, 'a');
  EXPECT_EQ(closest_match(word, {"compile", "verify"}), "");
  EXPECT_EQ(closest_match("verfy", {"compile", "verify"}), "verify");
}

// ---- tool calls ----

TEST(ToolCallLimitsTest, DeepArgumentsAreAnInputError) {
  const json call = {{"name", "compile"}, {"arguments", nested_arrays(200000)}};
  const std::string err = error_of([&] { parse_tool_call(call, SolutionMode::kCpp); });
  EXPECT_TRUE(contains(err, "field /arguments: the arguments are not valid JSON")) << err;
  EXPECT_TRUE(contains(err, "nested deeper than 64 levels")) << err;
}

TEST(ToolCallLimitsTest, DuplicateArgumentKeysAreAnInputError) {
  const json call = {{"name", "compile"}, {"arguments", R"({"source": "a", "source": "b"})"}};
  const std::string err = error_of([&] { parse_tool_call(call, SolutionMode::kCpp); });
  EXPECT_TRUE(contains(err, "duplicate key \"source\"")) << err;
}

// ---- tasks ----

json base_task() {
  return json::parse(R"({
    "id": "limits/t",
    "inputs": [{"name": "x", "shape": [4, 8]}],
    "nodes": [{"op": "relu", "in": ["x"], "out": "y"}],
    "outputs": ["y"]})");
}

std::string task_error(const json& task) {
  return error_of([&] { validate_task(parse_task(Document::from_value(task, "task.json"))); });
}

TEST(TaskLimitsTest, DeepIdIsRefusedByTheDocumentReader) {
  const std::string text = R"({"id": )" + nested_arrays(100000) + "}";
  const std::string err = error_of([&] { parse_task(Document::from_json_text(text, "deep_id.json")); });
  EXPECT_TRUE(contains(err, "deep_id.json: field /id/0/0/0")) << err;
  EXPECT_TRUE(contains(err, "nested deeper than 64 levels")) << err;
}

TEST(TaskLimitsTest, DeepAttrsAreRefusedByTheDocumentReader) {
  const std::string text = R"({"id": "t", "inputs": [{"name": "x", "shape": [4]}], "nodes": [{"op": "relu", "in": ["x"],
    "out": "y", "attrs": {"a": )" +
                           nested_arrays(100000) + "}}], \"outputs\": [\"y\"]}";
  const std::string err = error_of([&] { parse_task(Document::from_json_text(text, "deep_attrs.json")); });
  EXPECT_TRUE(contains(err, "deep_attrs.json: field /nodes/0/attrs/a/0/0")) << err;
  EXPECT_TRUE(contains(err, "nested deeper than 64 levels")) << err;
}

TEST(TaskLimitsTest, RankNineOutputIsRefusedNamingTheNode) {
  json t = base_task();
  t["nodes"] = json::parse(R"([{"op": "reshape", "in": ["x"], "out": "y",
                                "attrs": {"shape": [1, 1, 1, 1, 1, 1, 1, 4, 8]}}])");
  const std::string err = task_error(t);
  EXPECT_TRUE(contains(err, "task 'limits/t': node 0 (reshape): output \"y\": rank 9 is more than the 8 dimensions"))
      << err;
  EXPECT_TRUE(contains(err, "limits::kMaxTensorRank")) << err;
}

TEST(TaskLimitsTest, HugeVariantIsRefusedNamingTheVariant) {
  json t = base_task();
  t["shape_variants"] = json::parse(R"([{"x": [1048576, 1048576]}])");  // 2^40 elements
  const std::string err = task_error(t);
  EXPECT_TRUE(contains(err,
                       "task.json: field /shape_variants/0/x: shape [1048576, 1048576] has 1099511627776 "
                       "elements; a tensor may have at most 2147483647 (limits::kMaxTensorElements)"))
      << err;
}

TEST(TaskLimitsTest, HugeInputIsRefused) {
  json t = base_task();
  t["inputs"][0]["shape"] = {1 << 20, 1 << 20};
  EXPECT_TRUE(contains(task_error(t), "field /inputs/0/shape: shape [1048576, 1048576] has 1099511627776 elements"));
}

TEST(TaskLimitsTest, HugeBroadcastIntermediateIsRefused) {
  json t =
      json::parse(R"({"id": "bc", "inputs": [{"name": "a", "shape": [65536, 1]}, {"name": "b", "shape": [1, 65536]}],
    "nodes": [{"op": "add", "in": ["a", "b"], "out": "t0"}, {"op": "sum", "in": ["t0"], "out": "y"}],
    "outputs": ["y"]})");
  const std::string err = task_error(t);
  EXPECT_TRUE(contains(err, "task 'bc': node 0 (add): output \"t0\": shape [65536, 65536] has 4294967296 elements"))
      << err;
}

TEST(TaskLimitsTest, OverflowingRepeatIsRefusedWithoutANegativeDimension) {
  json t = base_task();
  t["nodes"] = json::parse(R"([{"op": "repeat", "in": ["x"], "out": "y",
                                "attrs": {"repeats": [2147483648, 2147483648, 2147483648]}}])");
  const std::string err = task_error(t);
  EXPECT_TRUE(contains(err,
                       "node 0 (repeat): output \"y\": shape [2147483648, 8589934592, 17179869184] has more "
                       "than 2^63 elements"))
      << err;
  EXPECT_FALSE(contains(err, "-")) << err;
}

TEST(TaskLimitsTest, IntAttrsBeyondTheRangeAreRefused) {
  json t = base_task();
  t["nodes"] =
      json::parse(R"([{"op": "repeat", "in": ["x"], "out": "y", "attrs": {"repeats": [4611686018427387904, 1]}}])");
  const std::string err = task_error(t);
  EXPECT_TRUE(contains(err,
                       "attr \"repeats\" = an array [4611686018427387904,1] is out of range: integer attrs are "
                       "within [-2^31, 2^31] (limits::kMaxAttrInt)"))
      << err;
}

TEST(TaskLimitsTest, VariantsOverflowingInTheGraphNameTheVariant) {
  json t = base_task();
  t["nodes"] = json::parse(R"([{"op": "repeat", "in": ["x"], "out": "y", "attrs": {"repeats": [1, 65536]}}])");
  t["shape_variants"] = json::parse(R"([{"x": [4, 8]}, {"x": [65536, 8]}])");
  const std::string err = task_error(t);
  EXPECT_TRUE(contains(err,
                       "task 'limits/t', shape variant 1: node 0 (repeat): output \"y\": shape [65536, 524288] "
                       "has 34359738368 elements"))
      << err;
}

TEST(TaskLimitsTest, TwentyThousandVariantsAreRefusedBeforeTheyAreRead) {
  json t = base_task();
  t["shape_variants"] = json::array();
  for (int i = 0; i < 20000; ++i) t["shape_variants"].push_back({{"x", {4, 8}}});
  const std::string err = task_error(t);
  EXPECT_TRUE(contains(err,
                       "field /shape_variants: 20000 shape variants; a task has at most 64 "
                       "(limits::kMaxShapeVariants)"))
      << err;
}

TEST(TaskLimitsTest, TooManyNodesAreRefused) {
  json t = base_task();
  t["nodes"] = json::array();
  std::string prev = "x";
  for (int i = 0; i < 1025; ++i) {
    const std::string out = "t" + std::to_string(i);
    t["nodes"].push_back({{"op", "relu"}, {"in", {prev}}, {"out", out}});
    prev = out;
  }
  t["outputs"] = {prev};
  EXPECT_TRUE(contains(task_error(t), "field /nodes: 1025 nodes; a task has at most 1024 (limits::kMaxTaskNodes)"));
}

TEST(TaskLimitsTest, LargeAttrsAreRefused) {
  json t = base_task();
  t["nodes"][0]["attrs"] = {{"pad", std::string(5000, 'p')}};
  EXPECT_TRUE(contains(task_error(t), "field /nodes/0/attrs: 5010 bytes of attrs; a node's attrs are at most 4096"));
}

TEST(TaskLimitsTest, LongNamesAreRefused) {
  json t = base_task();
  t["id"] = std::string(300, 'i');
  EXPECT_TRUE(contains(task_error(t), "field /id: expected a name of at most 256 bytes (limits::kMaxNameBytes)"));
}

TEST(TaskLimitsTest, WithVariantKeepsEverythingButTheVariants) {
  json t = base_task();
  t["shape_variants"] = json::parse(R"([{"x": [2, 8]}, {"x": [6, 8]}])");
  t["tolerance"] = {{"atol", 0.5}, {"rtol", 0.25}};
  t["baselines"] = {{"device", "d"}, {"eager_ms", 1.0}};
  t["description"] = "desc";
  t["params"] = json::parse(R"([{"name": "w", "shape": [8]}])");
  const TaskSpec task = parse_task(Document::from_value(t, "t"));
  json expected = to_json(task);
  expected.erase("shape_variants");
  expected["inputs"][0]["shape"] = {6, 8};
  EXPECT_EQ(to_json(task.with_variant(1)), expected);
}

TEST(TaskLimitsTest, TaskSetLoadRunsTheSameChecks) {
  TempDir dir;
  json t = base_task();
  t["shape_variants"] = json::parse(R"([{"x": [65536, 65536]}])");
  const fs::path file = dir.write("bad.json", t.dump());
  const std::string err = error_of([&] { load_task_set(file); });
  EXPECT_TRUE(contains(err, "bad.json")) << err;
  EXPECT_TRUE(contains(err, "limits::kMaxTensorElements")) << err;
}

TEST(DocumentLimitsTest, Utf8PrefixesNeverEndInsideACharacter) {
  const std::string text = "ab\xc3\xa9\xe2\x82\xac";  // "ab", e-acute (2 bytes), euro sign (3 bytes)
  EXPECT_EQ(utf8_prefix_bytes(text, 2), 2u);
  EXPECT_EQ(utf8_prefix_bytes(text, 3), 2u);  // inside the e-acute
  EXPECT_EQ(utf8_prefix_bytes(text, 4), 4u);
  EXPECT_EQ(utf8_prefix_bytes(text, 5), 4u);  // inside the euro sign
  EXPECT_EQ(utf8_prefix_bytes(text, 6), 4u);
  EXPECT_EQ(utf8_prefix_bytes(text, 7), 7u);
  EXPECT_EQ(utf8_prefix_bytes(text, 100), 7u);
  EXPECT_EQ(utf8_prefix_bytes(text, 0), 0u);
  EXPECT_EQ(utf8_prefix_bytes("", 5), 0u);
}

}  // namespace
}  // namespace kforge
