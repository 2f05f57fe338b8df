// The TrajectoryReceiver end to end against hand-driven ZeroMQ senders on
// loopback TCP (built on the same codec): duplicates acknowledged instead of
// delivered, a worker id claimed from two spools, version negotiation and
// session errors, malformed traffic, senders that vanish, and keys a trainer
// stored before a crash.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "kforge/core/msgpack.h"
#include "stream_test_support.h"

namespace kforge::rollout {
namespace {

using namespace std::chrono_literals;

TEST_F(StreamTest, DuplicatesOfAcknowledgedTrajectoriesAreAcknowledgedNotDelivered) {
  TrajectoryReceiver receiver(receiver_config());
  RawPeer dealer(zmq::socket_type::dealer, receiver.endpoint(), false);
  dealer.send(hello_frame("dup", "i1"));
  auto w = dealer.recv(5s);
  ASSERT_TRUE(w && std::holds_alternative<stream::Welcome>(*w));
  EXPECT_EQ(std::get<stream::Welcome>(*w).credit, 128u);
  const std::string data = msgpack::encode(trajectory("d1"));
  dealer.send(stream::encode_traj(1, "d1", data));
  auto d = receiver.next(5s);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->id, "d1");
  // Resent before the trainer acknowledged: not delivered again.
  dealer.send(stream::encode_traj(1, "d1", data));
  EXPECT_FALSE(receiver.next(300ms));
  EXPECT_EQ(receiver.ack({d->key()}), 1u);
  EXPECT_EQ(receiver.ack({d->key()}), 0u);  // once
  auto a = dealer.recv(5s);
  ASSERT_TRUE(a && std::holds_alternative<stream::Ack>(*a));
  EXPECT_EQ(std::get<stream::Ack>(*a).ranges, (std::vector<std::pair<uint64_t, uint64_t>>{{1, 1}}));
  // Resent after: acknowledged at once, never delivered.
  dealer.send(stream::encode_traj(1, "d1", data));
  auto again = dealer.recv(5s);
  ASSERT_TRUE(again && std::holds_alternative<stream::Ack>(*again));
  EXPECT_FALSE(receiver.next(300ms));
  EXPECT_EQ(receiver.stats().duplicates, 2u);
  EXPECT_EQ(receiver.stats().delivered, 1u);
}

TEST_F(StreamTest, AWorkerIdStreamingFromAnotherSpoolIsRefusedEvenAfterARestart) {
  auto config = receiver_config();
  std::string endpoint;
  {
    TrajectoryReceiver receiver(config);
    endpoint = receiver.endpoint();
    RawPeer a(zmq::socket_type::dealer, endpoint, false);
    a.send(hello_frame("twin", "spoolA"));
    auto w = a.recv(5s);
    ASSERT_TRUE(w && std::holds_alternative<stream::Welcome>(*w));
    RawPeer b(zmq::socket_type::dealer, endpoint, false);
    b.send(hello_frame("twin", "spoolB"));
    auto e = b.recv(5s);
    ASSERT_TRUE(e && std::holds_alternative<stream::Error>(*e));
    EXPECT_EQ(std::get<stream::Error>(*e).code, "worker_conflict");
    EXPECT_NE(std::get<stream::Error>(*e).message.find("spoolA"), std::string::npos);
  }
  config.bind = endpoint;
  TrajectoryReceiver again(config);
  RawPeer b(zmq::socket_type::dealer, endpoint, false);
  b.send(hello_frame("twin", "spoolB"));
  auto e = b.recv(5s);
  ASSERT_TRUE(e && std::holds_alternative<stream::Error>(*e));
  EXPECT_EQ(std::get<stream::Error>(*e).code, "worker_conflict");
}

TEST_F(StreamTest, VersionNegotiationAndSessionErrors) {
  TrajectoryReceiver receiver(receiver_config(false));
  RawPeer future(zmq::socket_type::dealer, receiver.endpoint(), false);
  future.send(hello_frame("f", "i", {3, 2}));
  auto e = future.recv(5s);
  ASSERT_TRUE(e && std::holds_alternative<stream::Error>(*e));
  EXPECT_EQ(std::get<stream::Error>(*e).code, "unsupported_version");
  EXPECT_EQ(std::get<stream::Error>(*e).versions, std::vector<int>{1});

  // A sender that speaks 3 and 1 gets 1.
  future.send(hello_frame("f", "i", {3, 1}));
  auto w = future.recv(5s);
  ASSERT_TRUE(w && std::holds_alternative<stream::Welcome>(*w));
  EXPECT_EQ(std::get<stream::Welcome>(*w).version, 1);

  RawPeer stranger(zmq::socket_type::dealer, receiver.endpoint(), false);
  stranger.send(stream::encode_traj(5, "x", msgpack::encode(trajectory("x"))));
  e = stranger.recv(5s);
  ASSERT_TRUE(e && std::holds_alternative<stream::Error>(*e));
  EXPECT_EQ(std::get<stream::Error>(*e).code, "no_session");
  EXPECT_EQ(std::get<stream::Error>(*e).seq, 5u);

  // A traj whose data is not a trajectory is rejected by seq.
  future.send(stream::encode(stream::Traj{7, "bad", std::string("\x81\xa1k", 3)}));
  e = future.recv(5s);
  ASSERT_TRUE(e && std::holds_alternative<stream::Error>(*e));
  EXPECT_EQ(std::get<stream::Error>(*e).code, "rejected");
  EXPECT_EQ(std::get<stream::Error>(*e).seq, 7u);

  // A sender does not send acks.
  future.send(stream::encode(stream::Ack{{{1, 1}}}));
  e = future.recv(5s);
  ASSERT_TRUE(e && std::holds_alternative<stream::Error>(*e));
  EXPECT_EQ(std::get<stream::Error>(*e).code, "bad_message");
}

TEST_F(StreamTest, MalformedTrafficDoesNotStopTheReceiver) {
  TrajectoryReceiver receiver(receiver_config(false));
  Trainer trainer(receiver);
  {
    RawPeer noise(zmq::socket_type::dealer, receiver.endpoint(), false);
    std::mt19937 rng(7);
    for (int i = 0; i < 2000; ++i) {
      std::string junk(rng() % 200, '\0');
      for (char& c : junk) c = static_cast<char>(rng());
      noise.send(junk);
    }
    zmq::context_t ctx;
    zmq::socket_t multi(ctx, zmq::socket_type::dealer);
    multi.connect(receiver.endpoint());
    multi.send(zmq::str_buffer("a"), zmq::send_flags::sndmore);
    multi.send(zmq::str_buffer("b"), zmq::send_flags::none);
    std::this_thread::sleep_for(200ms);
  }
  TrajectorySender sender(sender_config(receiver.endpoint(), "honest"));
  for (int i = 0; i < 20; ++i) sender.write_value(trajectory("h" + std::to_string(i)));
  EXPECT_TRUE(sender.flush(10s));
  trainer.stop();
  EXPECT_EQ(trainer.delivered().size(), 20u);
  EXPECT_GE(receiver.stats().errors, 1000u);
}

TEST_F(StreamTest, SendersThatVanishAreDroppedWhileHeartbeatsGoOut) {
  // Heartbeats to peers whose connections are gone fail and drop their
  // sessions, in the middle of the receiver's pass over all sessions.
  TrajectoryReceiver receiver(receiver_config(false));
  {
    std::vector<std::unique_ptr<RawPeer>> peers;
    for (int i = 0; i < 20; ++i) {
      peers.push_back(std::make_unique<RawPeer>(zmq::socket_type::dealer, receiver.endpoint(), false));
      peers.back()->send(hello_frame("ghost" + std::to_string(i), "i"));
      ASSERT_TRUE(peers.back()->recv(5s));
    }
    EXPECT_EQ(receiver.stats().sessions_live, 20u);
  }  // all gone at once
  ASSERT_TRUE(eventually([&] { return receiver.stats().sessions_live == 0; }, 5s));
  Trainer trainer(receiver);
  TrajectorySender sender(sender_config(receiver.endpoint(), "alive"));
  sender.write_value(trajectory("after"));
  EXPECT_TRUE(sender.flush(10s));
}

TEST_F(StreamTest, KeysStoredBeforeACrashAreAcknowledgedInsteadOfDelivered) {
  // A trainer stored w:3 and w:7 in an earlier run and died before
  // acknowledging them; it says so at start.
  TrajectoryReceiver receiver(receiver_config());
  EXPECT_EQ(receiver.ack_stored({{"stored", 3}, {"stored", 7}}), 2u);
  EXPECT_EQ(receiver.ack_stored({{"stored", 3}}), 0u);  // already known
  Trainer trainer(receiver);
  TrajectorySender sender(sender_config(receiver.endpoint(), "stored"));
  for (int i = 1; i <= 10; ++i) sender.write_value(trajectory("k" + std::to_string(i)));
  EXPECT_TRUE(sender.flush(10s));
  trainer.stop();
  std::set<uint64_t> seqs;
  for (const auto& d : trainer.delivered()) seqs.insert(d.seq);
  EXPECT_EQ(seqs, (std::set<uint64_t>{1, 2, 4, 5, 6, 8, 9, 10}));
  EXPECT_EQ(receiver.stats().duplicates, 2u);
}

TEST_F(StreamTest, AckStoredAlsoTakesWhatIsQueuedOrHandedOut) {
  TrajectoryReceiver receiver(receiver_config(false));
  RawPeer dealer(zmq::socket_type::dealer, receiver.endpoint(), false);
  dealer.send(hello_frame("q", "i"));
  ASSERT_TRUE(dealer.recv(5s));
  for (uint64_t seq : {1, 2})
    dealer.send(stream::encode_traj(seq, "q" + std::to_string(seq), msgpack::encode(trajectory("q"))));
  ASSERT_TRUE(eventually([&] { return receiver.stats().queued == 2; }));
  auto first = receiver.next(1s);  // seq 1 handed out, seq 2 queued
  ASSERT_TRUE(first);
  EXPECT_EQ(receiver.ack_stored({{"q", 1}, {"q", 2}}), 2u);
  EXPECT_FALSE(receiver.next(200ms));  // seq 2 left the queue
  EXPECT_EQ(receiver.stats().unacked, 0u);
  std::set<uint64_t> acked;
  while (acked.size() < 2) {
    auto m = dealer.recv(5s);
    ASSERT_TRUE(m && std::holds_alternative<stream::Ack>(*m));
    for (auto [a, b] : std::get<stream::Ack>(*m).ranges) {
      for (uint64_t x = a; x <= b; ++x) acked.insert(x);
    }
  }
}

}  // namespace
}  // namespace kforge::rollout
