// The receiver's acknowledged set: ranges, persistence across restarts,
// torn lines, compaction, and worker/instance claims.
#include "kforge/rollout/stream/receiver_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"

namespace kforge::rollout {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kforge-rstate-" + std::to_string(::getpid()) + "-" + name);
  kforge::remove_tree(dir);
  return dir;
}

TEST(SeqRangesTest, MergesAndAnswersMembership) {
  SeqRanges r;
  r.insert(5);
  r.insert(3);
  EXPECT_EQ(r.through(), 0u);
  r.insert(1, 2);
  EXPECT_EQ(r.through(), 3u);
  r.insert(4);
  EXPECT_EQ(r.through(), 5u);
  EXPECT_EQ(r.ranges().size(), 1u);
  r.insert(10, 20);
  r.insert(15, 30);
  r.insert(8, 9);
  EXPECT_EQ(r.ranges(), (std::map<uint64_t, uint64_t>{{1, 5}, {8, 30}}));
  EXPECT_TRUE(r.contains(8));
  EXPECT_TRUE(r.contains(30));
  EXPECT_FALSE(r.contains(6));
  EXPECT_FALSE(r.contains(31));
  r.insert(6, 7);
  EXPECT_EQ(r.through(), 30u);
  r.insert(UINT64_MAX - 1, UINT64_MAX);
  r.insert(UINT64_MAX);
  EXPECT_TRUE(r.contains(UINT64_MAX));
  EXPECT_EQ(r.ranges().size(), 2u);
}

TEST(ReceiverStateTest, AcknowledgementsSurviveARestart) {
  const fs::path dir = fresh_dir("restart");
  {
    ReceiverState s(dir);
    std::string known;
    EXPECT_TRUE(s.claim("w1", "inst1", &known));
    s.acknowledge({{"w1", {1, 2, 3, 7}}, {"w2", {4}}});
    EXPECT_TRUE(s.acknowledged("w1", 7));
  }
  ReceiverState s(dir);
  EXPECT_TRUE(s.acknowledged("w1", 2));
  EXPECT_TRUE(s.acknowledged("w1", 7));
  EXPECT_FALSE(s.acknowledged("w1", 5));
  EXPECT_TRUE(s.acknowledged("w2", 4));
  EXPECT_EQ(s.acked_through("w1"), 3u);
  std::string known;
  EXPECT_TRUE(s.claim("w1", "inst1", &known));
  EXPECT_FALSE(s.claim("w1", "other", &known));
  EXPECT_EQ(known, "inst1");
  kforge::remove_tree(dir);
}

TEST(ReceiverStateTest, ATornLastLineIsIgnoredAndCutAway) {
  const fs::path dir = fresh_dir("torn");
  {
    ReceiverState s(dir);
    s.acknowledge({{"w1", {1, 2}}});
  }
  {
    std::ofstream out(dir / "acks.log", std::ios::app);
    out << "ack w1 3 9";  // no newline: the process died mid-write
  }
  {
    ReceiverState s(dir);
    EXPECT_FALSE(s.acknowledged("w1", 3));
    s.acknowledge({{"w1", {5}}});  // must start a line of its own
  }
  ReceiverState s(dir);
  EXPECT_TRUE(s.acknowledged("w1", 5));
  EXPECT_FALSE(s.acknowledged("w1", 4));
  kforge::remove_tree(dir);
}

TEST(ReceiverStateTest, ADamagedLineIsAnErrorNamingFileAndLine) {
  const fs::path dir = fresh_dir("damaged");
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "acks.log");
    out << "ack w1 1 2\nack w1 9 x\n";
  }
  try {
    ReceiverState s(dir);
    FAIL();
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("acks.log:2"), std::string::npos) << e.what();
  }
  kforge::remove_tree(dir);
}

TEST(ReceiverStateTest, TheLogIsCompactedIntoASnapshot) {
  const fs::path dir = fresh_dir("compact");
  {
    ReceiverState s(dir);
    std::string known;
    s.claim("w1", "i1", &known);
    // Every other seq: many ranges, so the log grows past the compaction size.
    for (uint64_t base = 1; base < 2000000; base += 2000) {
      std::vector<uint64_t> seqs;
      for (uint64_t k = base; k < base + 2000; k += 2) seqs.push_back(k);
      s.acknowledge({{"w1", seqs}});
    }
  }
  EXPECT_TRUE(fs::exists(dir / "state.txt"));
  EXPECT_LT(fs::file_size(dir / "acks.log"), uint64_t{8} << 20);
  ReceiverState s(dir);
  EXPECT_TRUE(s.acknowledged("w1", 1));
  EXPECT_TRUE(s.acknowledged("w1", 1999999));
  EXPECT_FALSE(s.acknowledged("w1", 2));
  std::string known;
  EXPECT_FALSE(s.claim("w1", "i2", &known));
  EXPECT_EQ(known, "i1");
  kforge::remove_tree(dir);
}

TEST(ReceiverStateTest, InMemoryStateWritesNothing) {
  ReceiverState s;
  EXPECT_FALSE(s.persistent());
  s.acknowledge({{"w", {1}}});
  EXPECT_TRUE(s.acknowledged("w", 1));
}

}  // namespace
}  // namespace kforge::rollout
