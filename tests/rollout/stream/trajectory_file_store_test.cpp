// The exactly-once JSONL store behind `kforge receive`: committed lines
// survive a reopen, a torn last line is cut, a kill between the write and
// the checkpoint leaves lines that the next open hands back as recovered
// (and counts once), and a checkpoint of another output is refused. Real
// files; the kills of real processes are in trainer_bridge/python/tests.
#include "kforge/rollout/stream/trajectory_file_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kforge/core/error.h"
#include "kforge/core/msgpack.h"
#include "kforge/core/remove_tree.h"

namespace kforge::rollout {
namespace {

namespace fs = std::filesystem;
using Keys = std::vector<DeliveryKey>;

class TrajectoryFileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kforge-filestore-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    kforge::remove_tree(dir_);
    fs::create_directories(dir_);
    out_ = dir_ / "out.jsonl";
    state_ = dir_ / "out.jsonl.state";
  }
  void TearDown() override { kforge::remove_tree(dir_); }

  static Delivery delivery(const std::string& worker, uint64_t seq) {
    Delivery d;
    d.worker = worker;
    d.seq = seq;
    d.id = worker + "-" + std::to_string(seq);
    d.data = msgpack::encode(json{{"worker", worker}, {"seq", seq}});
    return d;
  }

  std::vector<json> lines() const {
    std::ifstream in(out_);
    std::vector<json> rows;
    std::string line;
    while (std::getline(in, line)) rows.push_back(json::parse(line));
    return rows;
  }

  std::string file_text() const {
    std::ifstream in(out_, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Opens the store and finishes recovery, collecting what it acknowledged as stored.
  std::unique_ptr<TrajectoryFileStore> open(Keys* acked_stored = nullptr) {
    auto store = std::make_unique<TrajectoryFileStore>(out_, state_, /*fsync=*/false);
    store->finish_recovery([&](const Keys& keys) {
      if (acked_stored != nullptr) *acked_stored = keys;
    });
    return store;
  }

  fs::path dir_, out_, state_;
};

TEST_F(TrajectoryFileStoreTest, CommittedRecordsSurviveAReopen) {
  {
    auto store = open();
    Keys acked;
    store->append({delivery("w1", 1), delivery("w2", 1)}, [&](const Keys& k) {
      // Acknowledged only once the lines are in the file.
      EXPECT_EQ(lines().size(), 2u);
      acked = k;
    });
    EXPECT_EQ(acked, (Keys{{"w1", 1}, {"w2", 1}}));
    store->append({delivery("w1", 2)}, [](const Keys&) {});
    EXPECT_EQ(store->records(), 3u);
  }
  Keys recovered{{"stale", 9}};
  auto store = open(&recovered);
  EXPECT_TRUE(recovered.empty()) << "a clean shutdown leaves nothing to recover";
  EXPECT_FALSE(store->dropped_torn_line());
  EXPECT_EQ(store->records(), 3u);
  EXPECT_EQ(store->out(), fs::absolute(out_).lexically_normal().string());
  store->append({delivery("w3", 1)}, [](const Keys&) {});
  const std::vector<json> rows = lines();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0], (json{{"worker", "w1"}, {"seq", 1}}));
  EXPECT_EQ(rows[2], (json{{"worker", "w1"}, {"seq", 2}}));
  EXPECT_EQ(rows[3], (json{{"worker", "w3"}, {"seq", 1}}));
  const FileStoreCheckpoint cp = TrajectoryFileStore::load_checkpoint(store->checkpoint_file(), store->out());
  EXPECT_EQ(cp.records, 4u);
  EXPECT_EQ(cp.committed_bytes, file_text().size());
  EXPECT_TRUE(cp.writing.empty());
}

TEST_F(TrajectoryFileStoreTest, ATornLastLineIsCutAndItsTrajectoryNotCounted) {
  {
    auto store = open();
    store->append({delivery("w1", 1)}, [](const Keys&) {});
  }
  const std::string committed = file_text();
  // A kill mid-write of the next batch: the checkpoint names it as being
  // written, the file holds half of its first line.
  {
    std::ofstream cp(state_ / "receive-out.json", std::ios::trunc);
    cp << json{{"out", fs::absolute(out_).lexically_normal().string()},
               {"committed_bytes", committed.size()},
               {"records", 1},
               {"writing", json::array({json::array({"w1", 2})})}}
              .dump()
       << "\n";
  }
  std::ofstream(out_, std::ios::app) << R"({"worker":"w1","se)";

  TrajectoryFileStore store(out_, state_, false);
  EXPECT_TRUE(store.dropped_torn_line());
  EXPECT_TRUE(store.recovered().empty()) << "half a line is not a stored trajectory";
  EXPECT_EQ(file_text(), committed) << "the torn line is cut off the file";
  store.finish_recovery([](const Keys&) {});
  EXPECT_EQ(store.records(), 1u);
  store.append({delivery("w1", 2)}, [](const Keys&) {});
  const std::vector<json> rows = lines();  // every line parses: nothing glued to the torn one
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1]["seq"], 2);
}

// Killed after (2) the write and before (4) the checkpoint: the file holds the
// batch, the checkpoint still says it was being written.
TEST_F(TrajectoryFileStoreTest, ACrashBetweenTheWriteAndTheCheckpointIsRecovered) {
  {
    auto store = open();
    store->append({delivery("w1", 1)}, [](const Keys&) {});
  }
  const fs::path cp_file = state_ / "receive-out.json";
  const FileStoreCheckpoint before = TrajectoryFileStore::load_checkpoint(cp_file, fs::absolute(out_).string());
  // Step (1) of the next batch of three, then two of its lines written
  // (a crash inside the write of the third's line leaves it torn).
  {
    json writing = json::array({json::array({"w1", 2}), json::array({"w2", 1}), json::array({"w1", 3})});
    std::ofstream cp(cp_file, std::ios::trunc);
    cp << json{{"out", before.out},
               {"committed_bytes", before.committed_bytes},
               {"records", before.records},
               {"writing", writing}}
              .dump()
       << "\n";
  }
  std::ofstream(out_, std::ios::app) << R"({"seq":2,"worker":"w1"})"
                                     << "\n"
                                     << R"({"seq":1,"worker":"w2"})"
                                     << "\n"
                                     << R"({"seq":3,"wor)";

  Keys acked_stored;
  {
    TrajectoryFileStore store(out_, state_, false);
    EXPECT_EQ(store.recovered(), (Keys{{"w1", 2}, {"w2", 1}}));
    // Killed again before acknowledging them: nothing was checkpointed, so
    // the next open finds the same.
  }
  {
    auto store = open(&acked_stored);
    EXPECT_EQ(acked_stored, (Keys{{"w1", 2}, {"w2", 1}}));
    EXPECT_EQ(store->records(), 3u);
    // The checkpoint and the file agree: the recovered lines are committed.
    const FileStoreCheckpoint cp = TrajectoryFileStore::load_checkpoint(cp_file, store->out());
    EXPECT_EQ(cp.records, 3u);
    EXPECT_EQ(cp.committed_bytes, file_text().size());
    EXPECT_TRUE(cp.writing.empty());
    // The rest of the batch comes again from its sender.
    store->append({delivery("w1", 3)}, [](const Keys&) {});
  }
  Keys again{{"stale", 1}};
  auto store = open(&again);
  EXPECT_TRUE(again.empty()) << "recovered lines are recovered once";
  EXPECT_EQ(store->records(), 4u);
  EXPECT_EQ(lines().size(), 4u);
}

TEST_F(TrajectoryFileStoreTest, LinesNobodyCheckpointedAreRefused) {
  { open(); }
  std::ofstream(out_, std::ios::app) << "{}\n";
  try {
    TrajectoryFileStore store(out_, state_, false);
    FAIL() << "a line past the checkpoint with no pending batch was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("lines past what this receiver checkpointed"), std::string::npos) << e.what();
  }
}

TEST_F(TrajectoryFileStoreTest, AShortenedOutputIsRefused) {
  {
    auto store = open();
    store->append({delivery("w1", 1)}, [](const Keys&) {});
  }
  fs::resize_file(out_, 3);
  EXPECT_THROW(TrajectoryFileStore(out_, state_, false), InputError);
}

TEST_F(TrajectoryFileStoreTest, ACheckpointOfAnotherOutputIsRefused) {
  { open(); }
  const fs::path other = dir_ / "other.jsonl";
  try {
    TrajectoryFileStore store(other, state_, false);
    FAIL() << "the state of " << out_ << " was used for " << other;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("belongs to the output " + fs::absolute(out_).lexically_normal().string()), std::string::npos)
        << what;
    EXPECT_NE(what.find("--state"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(other)) << "refused before the output is created";
}

TEST_F(TrajectoryFileStoreTest, AMalformedCheckpointNamesTheField) {
  fs::create_directories(state_);
  std::ofstream(state_ / "receive-out.json") << json{
      {"out", fs::absolute(out_).lexically_normal().string()},
      {"committed_bytes", 0},
      {"records", 0},
      {"writing", json::array({"w1"})}}.dump();
  try {
    TrajectoryFileStore store(out_, state_, false);
    FAIL() << "a malformed checkpoint was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("writing"), std::string::npos) << e.what();
  }
}

TEST_F(TrajectoryFileStoreTest, AppendBeforeRecoveryIsAProgrammingError) {
  TrajectoryFileStore store(out_, state_, false);
  EXPECT_THROW(store.append({delivery("w1", 1)}, [](const Keys&) {}), std::logic_error);
}

}  // namespace
}  // namespace kforge::rollout
