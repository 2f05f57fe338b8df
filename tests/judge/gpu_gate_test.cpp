// The GPU gate (judge/gpu_gate.h) across real processes: readers overlap,
// a writer is alone, a waiting writer keeps new readers out, a downgrade lets
// readers in but no writer, a holder that is SIGKILLed releases at once, and
// a waiter hears how long it waited while it waits.
#include "judge/gpu_gate.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "kforge/core/remove_tree.h"

namespace kforge::judge {
namespace {

namespace fs = std::filesystem;

// A child process that takes the gate as told and reports each step on a
// pipe: 'S' shared held, 'X' exclusive held, 'D' downgraded, 'R' released.
// It reads one command byte at a time: 's', 'x', 'd' (shared from exclusive),
// 'r' (release), 'q' (quit).
class GateHolder {
 public:
  GateHolder(const fs::path& dir, const std::string& key) {
    int to_child[2], from_child[2];
    EXPECT_EQ(::pipe(to_child), 0);
    EXPECT_EQ(::pipe(from_child), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(to_child[1]);
      ::close(from_child[0]);
      GpuGate gate(dir, key);
      char c = 0;
      while (::read(to_child[0], &c, 1) == 1) {
        char reply = '?';
        if (c == 's') {
          gate.shared();
          reply = 'S';
        } else if (c == 'x') {
          gate.exclusive();
          reply = 'X';
        } else if (c == 'd') {
          gate.shared();
          reply = 'D';
        } else if (c == 'r') {
          gate.release();
          reply = 'R';
        } else if (c == 'q') {
          ::_exit(0);
        }
        if (::write(from_child[1], &reply, 1) != 1) ::_exit(1);
      }
      ::_exit(0);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    in_ = to_child[1];
    out_ = from_child[0];
  }
  ~GateHolder() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(in_);
    ::close(out_);
  }

  void send(char c) { ASSERT_EQ(::write(in_, &c, 1), 1); }
  // The next step the child reports, or 0 if none within `ms`.
  char reply_within(int ms) {
    pollfd p{out_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return 0;
    char c = 0;
    return ::read(out_, &c, 1) == 1 ? c : 0;
  }
  void kill_hard() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
};

class GpuGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kforge-gate-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { remove_tree(dir_); }

  // Long enough that a lock that should block has had every chance not to.
  static constexpr int kBlockedMs = 300;
  static constexpr int kPromptMs = 5000;
  fs::path dir_;
};

TEST_F(GpuGateTest, ReadersShareAndAWriterWaitsForThem) {
  GateHolder a(dir_, "gpu-0000:01:00.0"), b(dir_, "gpu-0000:01:00.0"), w(dir_, "gpu-0000:01:00.0");
  a.send('s');
  EXPECT_EQ(a.reply_within(kPromptMs), 'S');
  b.send('s');
  EXPECT_EQ(b.reply_within(kPromptMs), 'S') << "two readers must hold the gate at once";
  w.send('x');
  EXPECT_EQ(w.reply_within(kBlockedMs), 0) << "the writer got in beside two readers";
  a.send('r');
  EXPECT_EQ(a.reply_within(kPromptMs), 'R');
  EXPECT_EQ(w.reply_within(kBlockedMs), 0) << "the writer got in beside a reader";
  b.send('r');
  EXPECT_EQ(b.reply_within(kPromptMs), 'R');
  EXPECT_EQ(w.reply_within(kPromptMs), 'X') << "the writer must get in once the readers left";
}

TEST_F(GpuGateTest, AWaitingWriterKeepsNewReadersOut) {
  GateHolder r1(dir_, "k"), w(dir_, "k"), r2(dir_, "k");
  r1.send('s');
  ASSERT_EQ(r1.reply_within(kPromptMs), 'S');
  w.send('x');
  ASSERT_EQ(w.reply_within(kBlockedMs), 0);
  // The writer holds the turnstile now: a reader arriving after it waits.
  r2.send('s');
  EXPECT_EQ(r2.reply_within(kBlockedMs), 0) << "a new reader overtook the waiting writer";
  r1.send('r');
  ASSERT_EQ(r1.reply_within(kPromptMs), 'R');
  EXPECT_EQ(w.reply_within(kPromptMs), 'X');
  EXPECT_EQ(r2.reply_within(kBlockedMs), 0) << "a reader got in beside the writer";
  w.send('r');
  ASSERT_EQ(w.reply_within(kPromptMs), 'R');
  EXPECT_EQ(r2.reply_within(kPromptMs), 'S');
}

TEST_F(GpuGateTest, ADowngradeLetsReadersInButNoWriter) {
  GateHolder w(dir_, "k"), r(dir_, "k"), w2(dir_, "k");
  w.send('x');
  ASSERT_EQ(w.reply_within(kPromptMs), 'X');
  r.send('s');
  w2.send('x');
  EXPECT_EQ(r.reply_within(kBlockedMs), 0);
  EXPECT_EQ(w2.reply_within(kBlockedMs), 0);
  w.send('d');
  ASSERT_EQ(w.reply_within(kPromptMs), 'D');
  // The holder is a reader now; the waiting writer may be the next through
  // the turnstile, but it cannot take the lock while a share is held.
  EXPECT_EQ(w2.reply_within(kBlockedMs), 0) << "a writer got in beside a downgraded holder";
  w.send('r');
  ASSERT_EQ(w.reply_within(kPromptMs), 'R');
  // Whichever passed the turnstile first holds the gate, and keeps the other out.
  const bool writer_in = w2.reply_within(1000) == 'X';
  const bool reader_in = r.reply_within(1000) == 'S';
  EXPECT_NE(writer_in, reader_in) << "exactly one of the waiting writer and reader must hold the gate";
}

TEST_F(GpuGateTest, AKilledHolderReleasesAtOnce) {
  GateHolder w(dir_, "k"), r(dir_, "k");
  w.send('x');
  ASSERT_EQ(w.reply_within(kPromptMs), 'X');
  r.send('s');
  EXPECT_EQ(r.reply_within(kBlockedMs), 0);
  w.kill_hard();
  EXPECT_EQ(r.reply_within(kPromptMs), 'S') << "a SIGKILLed writer left the gate locked";
}

TEST_F(GpuGateTest, GatesOfDifferentGpusAreIndependent) {
  GateHolder a(dir_, "gpu-0000:01:00.0"), b(dir_, "gpu-0000:02:00.0");
  a.send('x');
  ASSERT_EQ(a.reply_within(kPromptMs), 'X');
  b.send('x');
  EXPECT_EQ(b.reply_within(kPromptMs), 'X');
  EXPECT_TRUE(fs::exists(dir_ / "gpu-0000_01_00.0.gpu"));
  EXPECT_TRUE(fs::exists(dir_ / "gpu-0000_01_00.0.intent"));
}

TEST_F(GpuGateTest, ADisabledGateNeverWaits) {
  GpuGate off;
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.exclusive(), 0.0);
  EXPECT_EQ(off.hold(), GpuGate::Hold::kNone);
}

// A judge queued behind another process's hold tells its executor so, every
// interval, with the time waited (judge_loop.cpp, QueueNotices). Asserted:
// notices while blocked, their sum within the hold, none once the lock is
// free at once.
TEST_F(GpuGateTest, AWaiterIsToldHowLongItWaitedWhileItWaits) {
  GateHolder holder(dir_, "k");
  holder.send('x');
  ASSERT_EQ(holder.reply_within(kPromptMs), 'X');
  GpuGate gate(dir_, "k");
  std::atomic<int> notices{0};
  std::atomic<double> noticed_ms{0};
  gate.set_wait_notice(
      [&](double ms) {
        ++notices;
        noticed_ms = noticed_ms + ms;
      },
      100);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    holder.send('r');
  });
  const double waited = gate.shared();
  releaser.join();
  EXPECT_GE(waited, 900);
  EXPECT_GE(notices.load(), 1) << "no notice in a wait of " << waited << " ms";
  EXPECT_LE(noticed_ms.load(), waited + 1) << "more time noticed than waited";
  EXPECT_EQ(holder.reply_within(kPromptMs), 'R');

  // Free at once: no notice, no thread.
  gate.release();
  const int before = notices.load();
  gate.exclusive();
  gate.release();
  EXPECT_EQ(notices.load(), before);
}

TEST_F(GpuGateTest, NoNoticeOnceTurnedOff) {
  GateHolder holder(dir_, "k");
  holder.send('x');
  ASSERT_EQ(holder.reply_within(kPromptMs), 'X');
  GpuGate gate(dir_, "k");
  std::atomic<int> notices{0};
  gate.set_wait_notice([&](double) { ++notices; }, 50);
  gate.set_wait_notice(nullptr, 0);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    holder.send('r');
  });
  gate.shared();
  releaser.join();
  EXPECT_EQ(notices.load(), 0);
}

}  // namespace
}  // namespace kforge::judge
