// Length-prefixed MessagePack frames over socketpairs: round trips, descriptor
// passing, deadlines, closed and hostile peers.
#include "ipc/wire.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <thread>

namespace kforge::ipc {
namespace {

double thread_cpu_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct Pair {
  UniqueFd a, b;
  Pair() { make_socket_pair(&a, &b); }
};

TEST(Wire, RoundTripsObjects) {
  Pair p;
  json sent = {{"type", "call"}, {"seq", 42}, {"shape", {4096, 1024}}, {"x", 1.5}, {"s", std::string(1000, 'a')}};
  send_frame(p.a.get(), sent, Deadline::after_ms(1000));
  Frame got = recv_frame(p.b.get(), Deadline::after_ms(1000));
  EXPECT_EQ(got.body, sent);
  EXPECT_TRUE(got.fds.empty());
}

TEST(Wire, EncodesLittleEndianLength) {
  std::vector<uint8_t> bytes = encode_frame({{"type", "x"}});
  std::vector<uint8_t> payload = json::to_msgpack(json{{"type", "x"}});
  ASSERT_EQ(bytes.size(), payload.size() + 4);
  EXPECT_EQ(bytes[0], payload.size());
  EXPECT_EQ(bytes[1], 0);
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), bytes.begin() + 4));
}

TEST(Wire, LargeFramesCrossTheSocketBuffer) {
  Pair p;
  json big = {{"type", "big"}, {"blob", std::string(8 << 20, 'z')}};
  std::thread reader([&] {
    Frame f = recv_frame(p.b.get(), Deadline::after_ms(20000));
    EXPECT_EQ(f.body["blob"].get<std::string>().size(), 8u << 20);
  });
  send_frame(p.a.get(), big, Deadline::after_ms(20000));
  reader.join();
}

TEST(Wire, PassesDescriptorsThatStayUsable) {
  Pair p;
  UniqueFd mem(::memfd_create("wire-test", MFD_CLOEXEC));
  ASSERT_TRUE(mem);
  ASSERT_EQ(::write(mem.get(), "hello", 5), 5);
  send_frame(p.a.get(), {{"type", "setup"}}, Deadline::after_ms(1000), {mem.get()});
  Frame got = recv_frame(p.b.get(), Deadline::after_ms(1000));
  ASSERT_EQ(got.fds.size(), 1u);
  EXPECT_NE(got.fds[0].get(), mem.get());
  char buf[5] = {};
  ASSERT_EQ(::pread(got.fds[0].get(), buf, 5, 0), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  // Received descriptors are close-on-exec like every other fd of ours.
  EXPECT_TRUE(::fcntl(got.fds[0].get(), F_GETFD) & FD_CLOEXEC);
}

TEST(Wire, TimesOutWhenNothingArrives) {
  Pair p;
  try {
    recv_frame(p.b.get(), Deadline::after_ms(30));
    FAIL() << "expected a timeout";
  } catch (const WireError& e) {
    EXPECT_EQ(e.kind(), WireError::Kind::kTimeout);
  }
}

TEST(Wire, TimesOutOnAHalfFrame) {
  Pair p;
  std::vector<uint8_t> bytes = encode_frame({{"type", "x"}, {"pad", std::string(100, 'p')}});
  ASSERT_EQ(::write(p.a.get(), bytes.data(), 10), 10);
  try {
    recv_frame(p.b.get(), Deadline::after_ms(30));
    FAIL() << "expected a timeout";
  } catch (const WireError& e) {
    EXPECT_EQ(e.kind(), WireError::Kind::kTimeout);
  }
}

TEST(Wire, ReportsAClosedPeer) {
  Pair p;
  p.a.reset();
  try {
    recv_frame(p.b.get(), Deadline::after_ms(1000));
    FAIL() << "expected closed";
  } catch (const WireError& e) {
    EXPECT_EQ(e.kind(), WireError::Kind::kClosed);
  }
  // Sending to a closed peer must not raise SIGPIPE (the test would die).
  try {
    send_frame(p.b.get(), {{"type", "x"}}, Deadline::after_ms(1000));
    FAIL() << "expected closed";
  } catch (const WireError& e) {
    EXPECT_EQ(e.kind(), WireError::Kind::kClosed);
  }
}

TEST(Wire, RejectsOversizedAndGarbledFrames) {
  Pair p;
  uint8_t huge[4] = {0xff, 0xff, 0xff, 0x7f};
  ASSERT_EQ(::write(p.a.get(), huge, 4), 4);
  try {
    recv_frame(p.b.get(), Deadline::after_ms(1000));
    FAIL() << "expected malformed";
  } catch (const WireError& e) {
    EXPECT_EQ(e.kind(), WireError::Kind::kMalformed);
  }

  Pair q;
  uint8_t garbage[] = {3, 0, 0, 0, 0xc1, 0xc1, 0xc1};  // 0xc1 is never valid MessagePack
  ASSERT_EQ(::write(q.a.get(), garbage, sizeof(garbage)), static_cast<ssize_t>(sizeof(garbage)));
  try {
    recv_frame(q.b.get(), Deadline::after_ms(1000));
    FAIL() << "expected malformed";
  } catch (const WireError& e) {
    EXPECT_EQ(e.kind(), WireError::Kind::kMalformed);
  }
}

// Spinning receives (used by timed CUDA exchanges): the receiver burns its CPU
// while it waits up to spin_us, then sleeps like any other receive.
TEST(Wire, SpinningReceiveBusyWaitsForAFrameThatArrivesWhileSpinning) {
  Pair p;
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    send_frame(p.a.get(), {{"type", "late"}}, Deadline::after_ms(1000));
  });
  const double cpu_before = thread_cpu_ms();
  Frame got = recv_frame(p.b.get(), Deadline::never(), /*spin_us=*/2'000'000);
  const double cpu = thread_cpu_ms() - cpu_before;
  sender.join();
  EXPECT_EQ(got.body["type"], "late");
  // A sleeping receive uses microseconds of CPU over 30 ms; a spinning one
  // uses most of them (some may go to the sender on a loaded machine).
  EXPECT_GT(cpu, 1.0);
}

TEST(Wire, SpinningReceiveGivesUpAndSleepsUntilTheFrameComes) {
  Pair p;
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    send_frame(p.a.get(), {{"type", "later"}}, Deadline::after_ms(1000));
  });
  const double cpu_before = thread_cpu_ms();
  Frame got = recv_frame(p.b.get(), Deadline::never(), /*spin_us=*/2'000);
  const double cpu = thread_cpu_ms() - cpu_before;
  sender.join();
  EXPECT_EQ(got.body["type"], "later");
  EXPECT_LT(cpu, 100.0) << "kept spinning past spin_us";
}

TEST(Wire, SpinningReceiveReportsAClosedPeerAndTimeouts) {
  Pair p;
  try {
    recv_frame(p.b.get(), Deadline::after_ms(30), /*spin_us=*/1'000'000);
    FAIL() << "expected a timeout";
  } catch (const WireError& e) {
    EXPECT_EQ(e.kind(), WireError::Kind::kTimeout);
  }
  p.a.reset();
  try {
    recv_frame(p.b.get(), Deadline::never(), /*spin_us=*/1'000'000);
    FAIL() << "expected closed";
  } catch (const WireError& e) {
    EXPECT_EQ(e.kind(), WireError::Kind::kClosed);
  }
}

TEST(Wire, DecodeFrameIsTheReceivePathWithoutASocket) {
  const std::vector<uint8_t> bytes = encode_frame({{"type", "done"}, {"seq", 3}});
  const json body = decode_frame(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  EXPECT_EQ(body["type"], "done");
  auto malformed = [](const std::string& frame) {
    try {
      decode_frame(frame);
    } catch (const WireError& e) {
      EXPECT_EQ(e.kind(), WireError::Kind::kMalformed);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(malformed("\x01\x00").find("not a frame"), std::string::npos);
  EXPECT_NE(malformed(std::string("\x05\x00\x00\x00\x81", 5)).find("announces 5 bytes but holds 1"), std::string::npos);
  EXPECT_NE(malformed(std::string("\xff\xff\xff\xff", 4)).find("announces 4294967295 bytes"), std::string::npos);
  // A map nested past the message limit, a non-map, a repeated key.
  std::string deep = "\x81\xa4type" + std::string(200, '\x91') + "\xc0";
  std::string framed = std::string(1, static_cast<char>(deep.size())) + std::string("\x00\x00\x00", 3) + deep;
  EXPECT_NE(malformed(framed).find("nested deeper than 128 levels"), std::string::npos);
  EXPECT_NE(malformed(std::string("\x01\x00\x00\x00\x07", 5)).find("not a MessagePack map"), std::string::npos);
  const std::string dup = "\x82\xa4type\x01\xa4type\x02";
  EXPECT_NE(malformed(std::string(1, static_cast<char>(dup.size())) + std::string("\x00\x00\x00", 3) + dup)
                .find("repeats the key \"type\""),
            std::string::npos);
}

}  // namespace
}  // namespace kforge::ipc
