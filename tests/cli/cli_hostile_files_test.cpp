// Hostile documents given to the `kforge` executable (real processes, real
// files): /dev/zero, deep nesting, YAML aliases that expand without end,
// shapes past the limits, duplicate keys, unbounded configurations.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_test_support.h"
#include "kforge/core/remove_tree.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using kforge::testing::CmdResult;
using kforge::testing::config_arg;
using kforge::testing::has;
using kforge::testing::run_kforge;

// Hostile documents (docs/threat-model.md#outside-input): each one exits 2 naming the file and the limit.
class HostileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kforge-cli-hostile-XXXXXX").string();
    dir_ = ::mkdtemp(pattern.data());
  }
  void TearDown() override { kforge::remove_tree(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::FILE* f = std::fopen((dir_ / name).c_str(), "wb");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    return (dir_ / name).string();
  }
  static json task() {
    return json::parse(R"({"id": "t", "inputs": [{"name": "x", "shape": [4, 8]}],
                           "nodes": [{"op": "relu", "in": ["x"], "out": "y"}], "outputs": ["y"]})");
  }
  fs::path dir_;
};

TEST_F(HostileFiles, TaskCheckOfDevZeroReturnsAtOnce) {
  const CmdResult r = run_kforge("task check /dev/zero");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "/dev/zero: unknown file type")) << r.output;
  fs::create_symlink("/dev/zero", dir_ / "zero.json");
  const CmdResult z = run_kforge("task check '" + (dir_ / "zero.json").string() + "'");
  EXPECT_EQ(z.code, 2) << z.output;
  EXPECT_TRUE(has(z.output, "zero.json: more than the limit of 16777216 bytes")) << z.output;
}

TEST_F(HostileFiles, TaskCheckOfDeepIdOrAttrs) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string id = write("deep_id.json", R"({"id": )" + deep + "}");
  CmdResult r = run_kforge("task check '" + id + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "deep_id.json: field /id/0/0")) << r.output.substr(0, 400);
  EXPECT_TRUE(has(r.output, "nested deeper than 64 levels (limits::kMaxDocumentDepth)")) << r.output.substr(0, 400);

  json t = task();
  t["nodes"][0]["attrs"] = {{"a", 1}};
  std::string text = t.dump();
  text.replace(text.find("1}"), 1, deep);
  r = run_kforge("task check '" + write("deep_attrs.json", text) + "'");
  EXPECT_EQ(r.code, 2) << r.output.substr(0, 400);
  EXPECT_TRUE(has(r.output, "deep_attrs.json: field /nodes/0/attrs/a/0")) << r.output.substr(0, 400);
}

TEST_F(HostileFiles, TaskCheckOfBillionLaughs) {
  std::string yaml = "id: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i <= 9; ++i) {
    yaml += "k" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) yaml += std::string(k ? ", " : "") + "*a" + std::to_string(i - 1);
    yaml += "]\n";
  }
  const CmdResult r = run_kforge("task check '" + write("laughs.yaml", yaml) + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "laughs.yaml:")) << r.output;
  EXPECT_TRUE(has(r.output, "expands to more than 1000000 values (limits::kMaxDocumentValues")) << r.output;
}

TEST_F(HostileFiles, TaskCheckOfShapeLimits) {
  json variants = task();
  variants["shape_variants"] = json::array();
  for (int i = 0; i < 20000; ++i) variants["shape_variants"].push_back({{"x", {4, 8}}});
  CmdResult r = run_kforge("task check '" + write("variants.json", variants.dump()) + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output,
                  "variants.json: field /shape_variants: 20000 shape variants; a task has at most 64 "
                  "(limits::kMaxShapeVariants)"))
      << r.output;

  json rank9 = task();
  rank9["nodes"][0] = {
      {"op", "reshape"}, {"in", {"x"}}, {"out", "y"}, {"attrs", {{"shape", {1, 1, 1, 1, 1, 1, 1, 4, 8}}}}};
  r = run_kforge("task check '" + write("rank9.json", rank9.dump()) + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "rank9.json: task 't': node 0 (reshape): output \"y\": rank 9 is more than the 8"))
      << r.output;

  json big = task();
  big["shape_variants"] = {{{"x", {1 << 20, 1 << 20}}}};
  r = run_kforge("task check '" + write("big.json", big.dump()) + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output,
                  "big.json: field /shape_variants/0/x: shape [1048576, 1048576] has 1099511627776 "
                  "elements; a tensor may have at most 2147483647 (limits::kMaxTensorElements)"))
      << r.output;

  json broadcast = json::parse(R"({"id": "bc", "inputs": [{"name": "a", "shape": [65536, 1]},
      {"name": "b", "shape": [1, 65536]}], "nodes": [{"op": "add", "in": ["a", "b"], "out": "y"}], "outputs": ["y"]})");
  r = run_kforge("task check '" + write("bc.json", broadcast.dump()) + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "bc.json: task 'bc': node 0 (add): output \"y\": shape [65536, 65536] has 4294967296"))
      << r.output;

  json repeat = task();
  repeat["nodes"][0] = {
      {"op", "repeat"}, {"in", {"x"}}, {"out", "y"}, {"attrs", {{"repeats", {2147483648, 2147483648, 2147483648}}}}};
  r = run_kforge("task check '" + write("repeat.json", repeat.dump()) + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output,
                  "repeat.json: task 't': node 0 (repeat): output \"y\": shape [2147483648, "
                  "8589934592, 17179869184] has more than 2^63 elements"))
      << r.output;
}

TEST_F(HostileFiles, DuplicateJsonKeysAreAnError) {
  const CmdResult r = run_kforge("task check '" + write("dup.json", R"({"id": "a", "id": "b", "inputs": []})") + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "dup.json: field /: duplicate key \"id\"")) << r.output;
}

TEST_F(HostileFiles, ServeRefusesUnboundedConfigsAndBadTaskSets) {
  const std::string config = write("huge_timeout.yaml", "backend: cpu\neval:\n  eval_timeout_ms: 1e13\n");
  CmdResult r = run_kforge("serve --config '" + config + "' --bind tcp://127.0.0.1:0");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "huge_timeout.yaml:3:20: field /eval/eval_timeout_ms: expected a number in [0, 8.64e+07]"))
      << r.output;

  const std::string device = write("device.yaml", "backend: cpu\ndevice: 3\n");
  r = run_kforge("serve --config '" + device + "' --bind tcp://127.0.0.1:0");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "field /device: the cpu backend has one device, 0; got 3")) << r.output;
  EXPECT_FALSE(has(r.output, "\"endpoint\"")) << "it must not report ready: " << r.output;

  r = run_kforge("serve " + config_arg() + " --bind tcp://127.0.0.1:0 --tasks /dev/zero");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "/dev/zero")) << r.output;
}

}  // namespace
