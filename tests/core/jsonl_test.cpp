// JSON Lines, the task-set loader built on it and SHA-256: real files in the
// build tree.
#include "kforge/core/jsonl.h"

#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "kforge/core/remove_tree.h"
#include "kforge/core/sha256.h"
#include "kforge/core/task_set.h"

namespace kforge {
namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::path(KFORGE_BINARY_DIR) / "tests/core" / name;
  kforge::remove_tree(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<json> read_all(const std::filesystem::path& path, JsonlReadOptions options = {}) {
  std::vector<json> out;
  for_each_jsonl_line(
      path, [&](const Document& doc, size_t) { out.push_back(doc.root); }, options);
  return out;
}

TEST(JsonlTest, WriterAppendsWholeLinesAndReaderSkipsBlankOnes) {
  const auto path = fresh_dir("jsonl") / "records.jsonl";
  {
    JsonlWriter w(path, JsonlWriter::Mode::kTruncate);
    w.write({{"a", 1}});
    w.write({{"b", "two\nlines"}});
    EXPECT_EQ(w.records_written(), 2u);
  }
  {
    JsonlWriter w(path, JsonlWriter::Mode::kAppend, /*sync=*/true);
    w.write(json::array({1, 2}));
  }
  std::ofstream(path, std::ios::app) << "\n   \n";
  const auto records = read_all(path);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[1]["b"], "two\nlines");
  EXPECT_EQ(records[2], json::array({1, 2}));
}

TEST(JsonlTest, TornTailIsSkippedOnlyWhenAllowed) {
  const auto path = fresh_dir("torn") / "records.jsonl";
  std::ofstream(path) << "{\"a\": 1}\n{\"b\": ";
  JsonlReadOptions resumable;
  resumable.allow_torn_tail = true;
  EXPECT_EQ(read_all(path, resumable).size(), 1u);
  try {
    read_all(path);
    ADD_FAILURE() << "a torn last line was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("records.jsonl:2"), std::string::npos) << e.what();
  }
}

TEST(JsonlTest, OverlongLineNamesItsNumberWithoutBufferingIt) {
  const auto path = fresh_dir("long") / "records.jsonl";
  {
    std::ofstream out(path);
    out << "{}\n\"" << std::string(5000, 'x') << "\"\n";
  }
  JsonlReadOptions small;
  small.max_line_bytes = 1000;
  try {
    read_all(path, small);
    ADD_FAILURE() << "an overlong line was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("records.jsonl:2: line longer than 1000 bytes"), std::string::npos)
        << e.what();
  }
}

TEST(JsonlTest, UnwritablePathIsAnInputError) {
  EXPECT_THROW(JsonlWriter("/nonexistent-dir/x.jsonl", JsonlWriter::Mode::kTruncate), InputError);
}

TEST(TaskSetTest, LoadsTheBundledExamplesAndAJsonlSet) {
  const auto examples = load_task_set(std::filesystem::path(KFORGE_SOURCE_DIR) / "examples");
  ASSERT_GE(examples.size(), 5u);
  const auto path = fresh_dir("taskset") / "tasks.jsonl";
  {
    JsonlWriter w(path, JsonlWriter::Mode::kTruncate);
    for (const auto& t : examples) w.write(to_json(t));
  }
  const auto again = load_task_set(path);
  ASSERT_EQ(again.size(), examples.size());
  for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(to_json(again[i]), to_json(examples[i]));
}

TEST(TaskSetTest, RejectsDuplicatesAndEmptyDirectories) {
  const auto dir = fresh_dir("taskset-dup");
  EXPECT_THROW(load_task_set(dir), InputError);
  const auto examples = load_task_set(std::filesystem::path(KFORGE_SOURCE_DIR) / "examples");
  const std::string line = to_json(examples.at(0)).dump();
  std::ofstream(dir / "tasks.jsonl") << line << "\n\n" << line << "\n";
  try {
    load_task_set(dir / "tasks.jsonl");
    ADD_FAILURE() << "duplicate ids were accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tasks.jsonl:3: duplicate task id"), std::string::npos) << e.what();
  }
}

TEST(Sha256Test, KnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace kforge
