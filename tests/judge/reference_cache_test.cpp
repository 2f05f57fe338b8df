// The judge's reference cache (judge/reference_cache.h) on its own: entries
// found by task and seed, bounded in bytes, least recently used out first.
#include "judge/reference_cache.h"

#include <gtest/gtest.h>

#include <memory>

#include "test_support.h"

namespace kforge::judge {
namespace {

// An entry of `bytes` bytes: one input and one reference output of float32.
std::shared_ptr<const CachedReference> entry(int64_t bytes) {
  auto e = std::make_shared<CachedReference>();
  e->inputs.push_back(at::zeros({bytes / 8}, at::kFloat));
  e->reference.push_back(at::ones({bytes / 8}, at::kFloat));
  return e;
}

TEST(ReferenceCache, FindsWhatWasKeptForTheSameTaskAndSeedOnly) {
  ReferenceCache cache;
  cache.set_bound(1 << 20);
  const std::string task = R"({"id":"t/add"})";
  auto kept = entry(1024);
  cache.insert(ReferenceCache::key(task, 7), kept);
  EXPECT_EQ(cache.find(ReferenceCache::key(task, 7)), kept);
  EXPECT_EQ(cache.find(ReferenceCache::key(task, 8)), nullptr);
  EXPECT_EQ(cache.find(ReferenceCache::key(R"({"id":"t/mul"})", 7)), nullptr);
  // The seed and the task cannot run into each other.
  EXPECT_NE(ReferenceCache::key("1|x", 2), ReferenceCache::key("x", 21));
  EXPECT_EQ(cache.held_bytes(), 1024u);
  const auto stats = cache.to_json();
  EXPECT_EQ(stats["hits"], 1);
  EXPECT_EQ(stats["misses"], 2);
  EXPECT_EQ(stats["entries"], 1);
}

// What changes the draws or the reference changes the key; what the judge
// never reads for them (meta, baselines, tolerance) does not.
TEST(ReferenceCache, TheKeyIsWhatDecidesTheInputsAndTheReference) {
  const TaskSpec task = testing::task_from_json(R"({"id": "t/leaky", "inputs": [
      {"name": "x", "shape": [64], "dtype": "float32"}],
    "nodes": [{"op": "leaky_relu", "in": ["x"], "out": "y", "attrs": {"negative_slope": 0.1}}], "outputs": ["y"]})");
  TaskSpec annotated = task;
  annotated.meta = {{"origin", "a long story"}};
  annotated.baselines = Baselines{"NVIDIA H100", 1.5, 0.9};
  annotated.tolerance = Tolerance{1e-3, 1e-3};
  EXPECT_EQ(ReferenceCache::case_text(annotated), ReferenceCache::case_text(task));
  TaskSpec other_attr = task;
  other_attr.nodes[0].attrs["negative_slope"] = 0.2;
  EXPECT_NE(ReferenceCache::case_text(other_attr), ReferenceCache::case_text(task));
  TaskSpec other_shape = task;
  other_shape.inputs[0].shape = {65};
  EXPECT_NE(ReferenceCache::case_text(other_shape), ReferenceCache::case_text(task));
}

TEST(ReferenceCache, KeepsWithinItsBoundLeastRecentlyUsedOutFirst) {
  ReferenceCache cache;
  cache.set_bound(3000);
  cache.insert("a", entry(1000));
  cache.insert("b", entry(1000));
  cache.insert("c", entry(1000));
  ASSERT_NE(cache.find("a"), nullptr);  // a is now the most recently used
  cache.insert("d", entry(1000));       // b goes
  EXPECT_EQ(cache.find("b"), nullptr);
  EXPECT_NE(cache.find("a"), nullptr);
  EXPECT_NE(cache.find("c"), nullptr);
  EXPECT_NE(cache.find("d"), nullptr);
  EXPECT_EQ(cache.held_bytes(), 3000u);
  // Replacing an entry does not count it twice.
  cache.insert("d", entry(2000));
  EXPECT_EQ(cache.held_bytes(), 3000u);
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(cache.to_json()["evictions"], 2);
}

TEST(ReferenceCache, ALowerBoundEvictsAndAnEntryLargerThanItIsNotKept) {
  ReferenceCache cache;
  cache.set_bound(4000);
  cache.insert("a", entry(1000));
  cache.insert("b", entry(1000));
  cache.set_bound(1500);
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_NE(cache.find("b"), nullptr);
  cache.insert("big", entry(2000));
  EXPECT_EQ(cache.find("big"), nullptr);
  EXPECT_NE(cache.find("b"), nullptr) << "a refused entry evicts nothing";
  cache.set_bound(0);
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_EQ(cache.held_bytes(), 0u);
  cache.insert("a", entry(8));
  EXPECT_EQ(cache.entries(), 0u) << "a bound of 0 keeps nothing";
}

}  // namespace
}  // namespace kforge::judge
