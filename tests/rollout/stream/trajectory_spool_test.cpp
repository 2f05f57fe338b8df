// The sender's disk spool: recovery after kills (torn records), ack
// bookkeeping, segment reuse, sequence numbers that survive everything, and
// precise errors for damage and misuse.
#include "kforge/rollout/stream/trajectory_spool.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "crc32c.h"
#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"

namespace kforge::rollout {
namespace {

namespace fs = std::filesystem;

class SpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kforge-spool-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    kforge::remove_tree(dir_);
  }
  void TearDown() override { kforge::remove_tree(dir_); }

  SpoolOptions options(uint64_t max_bytes = 1 << 20, uint64_t segment = 64 << 10) {
    SpoolOptions o;
    o.dir = dir_;
    o.worker_id = "w1";
    o.max_bytes = max_bytes;
    o.segment_bytes = segment;
    return o;
  }

  std::vector<fs::path> segments() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".kfs") out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  static std::string payload(int i, size_t size = 100) {
    std::string p = "\x81\xa2id";  // a MessagePack map, then filler
    p += std::to_string(i);
    p.resize(size, static_cast<char>('a' + i % 26));
    return p;
  }

  fs::path dir_;
};

TEST(Crc32cTest, MatchesTheStandardCheckValue) {
  EXPECT_EQ(internal::crc32c(0, "123456789", 9), 0xe3069283u);
  // Incremental use gives the same as one call.
  EXPECT_EQ(internal::crc32c(internal::crc32c(0, "1234", 4), "56789", 5), 0xe3069283u);
  EXPECT_EQ(internal::crc32c(0, "", 0), 0u);
}

TEST_F(SpoolTest, RecordsSurviveReopeningAndAcksAreRemembered) {
  std::string instance;
  {
    TrajectorySpool s(options());
    instance = s.instance();
    EXPECT_EQ(instance.size(), 32u);
    for (int i = 1; i <= 10; ++i) EXPECT_EQ(s.append("t" + std::to_string(i), payload(i)), uint64_t(i));
    EXPECT_EQ(s.acknowledge({2, 3, 9, 42}), 3u);  // 42 was never written
  }
  TrajectorySpool s(options());
  EXPECT_EQ(s.instance(), instance);
  EXPECT_EQ(s.next_seq(), 11u);
  std::vector<uint64_t> pending;
  for (const auto& [seq, rec] : s.pending()) pending.push_back(seq);
  EXPECT_EQ(pending, (std::vector<uint64_t>{1, 4, 5, 6, 7, 8, 10}));
  EXPECT_EQ(s.pending().at(4).id, "t4");
  EXPECT_EQ(s.read(4), payload(4));
  EXPECT_EQ(s.read(10), payload(10));
  EXPECT_EQ(s.pending_bytes(), 7u * 100);
}

TEST_F(SpoolTest, ATornLastRecordIsDroppedAndItsSeqIsReused) {
  {
    TrajectorySpool s(options());
    for (int i = 1; i <= 3; ++i) s.append("t" + std::to_string(i), payload(i));
  }
  // A process killed inside write(2): half a record at the end.
  const fs::path seg = segments().back();
  const auto size = fs::file_size(seg);
  {
    std::ofstream out(seg, std::ios::app | std::ios::binary);
    std::string partial = "KFR1";
    partial += std::string(30, '\x07');
    out << partial;
  }
  TrajectorySpool s(options());
  EXPECT_EQ(s.pending().size(), 3u);
  EXPECT_EQ(fs::file_size(seg), size);  // truncated back
  EXPECT_EQ(s.next_seq(), 4u);          // never reported written, so the seq is free
  EXPECT_EQ(s.append("t4", payload(4)), 4u);
  EXPECT_EQ(s.read(4), payload(4));
}

TEST_F(SpoolTest, ACorruptedLastRecordFailsItsChecksumAndIsDropped) {
  {
    TrajectorySpool s(options());
    for (int i = 1; i <= 3; ++i) s.append("t" + std::to_string(i), payload(i));
  }
  const fs::path seg = segments().back();
  {
    std::fstream f(seg, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(seg) - 5));
    f.put('X');
  }
  TrajectorySpool s(options());
  EXPECT_EQ(s.pending().size(), 2u);
  EXPECT_EQ(s.next_seq(), 3u);
}

TEST_F(SpoolTest, DamageBeforeTheLastSegmentIsAnErrorNamingTheFileAndOffset) {
  {
    TrajectorySpool s(options(1 << 20, 64 << 10));
    for (int i = 1; i <= 40; ++i) s.append("t" + std::to_string(i), payload(i, 4000));  // several segments
  }
  ASSERT_GE(segments().size(), 2u);
  const fs::path first = segments().front();
  {
    std::fstream f(first, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4026 + 24 + 2 + 100);  // the payload of the second record (the first is 24 + 2 + 4000 bytes)
    f.put('X');
  }
  try {
    TrajectorySpool s(options(1 << 20, 64 << 10));
    FAIL() << "opened a damaged spool";
  } catch (const SystemError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(first.filename().string()), std::string::npos) << what;
    EXPECT_NE(what.find("offset 4026"), std::string::npos) << what;
    EXPECT_NE(what.find("checksum"), std::string::npos) << what;
  }
  EXPECT_TRUE(fs::exists(first));  // nothing deleted
}

TEST_F(SpoolTest, AcknowledgedSegmentsAreFreedAndTheNextSeqSurvivesAnEmptySpool) {
  {
    TrajectorySpool s(options(1 << 20, 64 << 10));
    std::vector<uint64_t> all;
    for (int i = 1; i <= 60; ++i) all.push_back(s.append("t" + std::to_string(i), payload(i, 4000)));
    const size_t before = segments().size();
    ASSERT_GE(before, 3u);
    s.acknowledge(all);
    EXPECT_EQ(segments().size(), 1u);  // only the active segment stays
    EXPECT_LT(s.disk_bytes(), 64u << 10);
    EXPECT_TRUE(s.pending().empty());
  }
  TrajectorySpool s(options(1 << 20, 64 << 10));
  EXPECT_TRUE(s.pending().empty());
  EXPECT_EQ(s.next_seq(), 61u);
  EXPECT_EQ(s.append("t61", payload(61)), 61u);
}

TEST_F(SpoolTest, OutOfOrderAcksKeepASegmentUntilItsLastRecordIsAcked) {
  TrajectorySpool s(options(1 << 20, 64 << 10));
  for (int i = 1; i <= 40; ++i) s.append("t" + std::to_string(i), payload(i, 4000));
  const size_t total = segments().size();
  std::vector<uint64_t> all_but_one;
  for (uint64_t i = 2; i <= 40; ++i) all_but_one.push_back(i);
  s.acknowledge(all_but_one);
  EXPECT_EQ(segments().size(), 2u) << "the first segment (holding seq 1) and the active one, of " << total;
  s.acknowledge({1});
  EXPECT_EQ(segments().size(), 1u);
}

TEST_F(SpoolTest, TheSizeLimitCountsDisk) {
  TrajectorySpool s(options(256 << 10, 64 << 10));
  int written = 0;
  while (s.fits(3, 4000)) {
    s.append("t" + std::to_string(written), payload(written, 4000));
    ++written;
  }
  EXPECT_LE(s.disk_bytes(), 256u << 10);
  EXPECT_GT(written, 50);
  EXPECT_THROW(s.append("xyz", payload(0, 4000)), SystemError);
  // Acknowledging the oldest segments makes room.
  std::vector<uint64_t> first_half;
  for (int i = 1; i <= written / 2; ++i) first_half.push_back(static_cast<uint64_t>(i));
  s.acknowledge(first_half);
  EXPECT_TRUE(s.fits(3, 4000));
}

TEST_F(SpoolTest, ASpoolBelongsToOneWorkerAndOneProcess) {
  TrajectorySpool s(options());
  // Another process (the lock is per open file description; a child is a
  // real second opener).
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      TrajectorySpool again(options());
      _exit(1);
    } catch (const SystemError& e) {
      _exit(std::string(e.what()).find("in use by another process") != std::string::npos ? 0 : 2);
    } catch (...) {
      _exit(3);
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);

  SpoolOptions other = options();
  other.worker_id = "w2";
  other.dir = dir_ / "sub";
  { TrajectorySpool made(other); }
  other.worker_id = "w3";
  try {
    TrajectorySpool wrong(other);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to worker \"w2\""), std::string::npos) << e.what();
  }
}

TEST_F(SpoolTest, BadOptionsAreNamed) {
  SpoolOptions o = options();
  o.worker_id = "bad id";
  EXPECT_THROW(TrajectorySpool{o}, InputError);
  o = options();
  o.max_bytes = 1000;
  EXPECT_THROW(TrajectorySpool{o}, InputError);
  o = options(1 << 20, 1 << 20);
  EXPECT_THROW(TrajectorySpool{o}, InputError);
}

TEST_F(SpoolTest, SetAsideKeepsTheRecordAndFreesTheSpool) {
  {
    TrajectorySpool s(options());
    s.append("keep", payload(1));
    s.append("odd", payload(2));
    s.set_aside(2, "too large for the receiver");
    EXPECT_EQ(s.pending().size(), 1u);
    EXPECT_EQ(s.rejected_count(), 1u);
  }
  TrajectorySpool s(options());
  EXPECT_EQ(s.pending().size(), 1u);
  EXPECT_EQ(s.rejected_count(), 1u);
  std::ifstream in(dir_ / "rejected" / "2.msgpack", std::ios::binary);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, payload(2));
  std::ifstream index(dir_ / "rejected.jsonl");
  std::string line;
  std::getline(index, line);
  EXPECT_NE(line.find("\"id\":\"odd\""), std::string::npos) << line;
  EXPECT_NE(line.find("too large"), std::string::npos) << line;
}

TEST_F(SpoolTest, AnAckLogTornByAKillIsReadUpToItsLastWholeEntry) {
  {
    TrajectorySpool s(options());
    for (int i = 1; i <= 5; ++i) s.append("t", payload(i));
    s.acknowledge({1, 2});
  }
  {
    std::ofstream out(dir_ / "acks.log", std::ios::app | std::ios::binary);
    out << std::string(9, '\x01');  // part of an entry
  }
  TrajectorySpool s(options());
  EXPECT_EQ(s.pending().size(), 3u);
  EXPECT_EQ(s.pending().begin()->first, 3u);
}

}  // namespace
}  // namespace kforge::rollout
