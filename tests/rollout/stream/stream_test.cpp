// The trajectory stream end to end in one process, from the sender's side:
// real TrajectorySenders and TrajectoryReceivers on loopback TCP delivering
// exactly once, credit and reconnection against a hand-driven receiver,
// restarts of either end, limits, configuration errors, CURVE and the sink
// interface. The receiver facing misbehaving senders is in
// stream_receiver_test.cpp. Process kills are tested in
// trainer_bridge/python/tests/test_stream_faults.py.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "kforge/core/error.h"
#include "kforge/rollout/stream/curve.h"
#include "stream_test_support.h"

namespace kforge::rollout {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_F(StreamTest, EverySenderDeliversEverythingExactlyOnce) {
  TrajectoryReceiver receiver(receiver_config());
  Trainer trainer(receiver);
  constexpr int kSenders = 3, kEach = 300;
  std::vector<std::unique_ptr<TrajectorySender>> senders;
  for (int s = 0; s < kSenders; ++s) {
    senders.push_back(std::make_unique<TrajectorySender>(sender_config(receiver.endpoint(), "w" + std::to_string(s))));
  }
  std::vector<std::thread> writers;
  for (int s = 0; s < kSenders; ++s) {
    writers.emplace_back([&, s] {
      for (int i = 0; i < kEach; ++i)
        senders[s]->write_value(trajectory("w" + std::to_string(s) + "-" + std::to_string(i)));
    });
  }
  for (auto& t : writers) t.join();
  for (auto& s : senders) EXPECT_TRUE(s->flush(20s));
  trainer.stop();

  std::set<DeliveryKey> keys;
  std::set<std::string> ids;
  for (const auto& d : trainer.delivered()) {
    EXPECT_TRUE(keys.insert(d.key()).second) << "delivered twice: " << d.worker << " " << d.seq;
    ids.insert(d.id);
    EXPECT_EQ(d.trajectory()["id"], d.id);
  }
  EXPECT_EQ(keys.size(), size_t{kSenders * kEach});
  EXPECT_EQ(ids.size(), size_t{kSenders * kEach});
  for (auto& s : senders) {
    const SenderStats st = s->stats();
    EXPECT_EQ(st.written, uint64_t{kEach});
    EXPECT_EQ(st.acked, uint64_t{kEach});
    EXPECT_EQ(st.unacked, 0u);
    EXPECT_EQ(st.next_seq, uint64_t{kEach + 1});
    EXPECT_GT(st.ack_latency_p99_ms, 0.0);
  }
  const ReceiverStats rs = receiver.stats();
  EXPECT_EQ(rs.acked, uint64_t{kSenders * kEach});
  EXPECT_EQ(rs.unacked, 0u);
}

TEST_F(StreamTest, TheSenderNeverHasMoreInFlightThanTheCreditGranted) {
  RawPeer router(zmq::socket_type::router, "tcp://127.0.0.1:*", true);
  TrajectorySender sender(sender_config(router.endpoint(), "credit"));
  for (int i = 1; i <= 10; ++i) sender.write_value(trajectory("t" + std::to_string(i)));
  std::string rid;
  auto hello = router.recv(5s, &rid);
  ASSERT_TRUE(hello && std::holds_alternative<stream::Hello>(*hello));
  stream::Welcome w;
  w.credit = 3;
  w.max_message_bytes = 1 << 20;
  router.send_to(rid, stream::encode(w));

  auto collect = [&](std::chrono::milliseconds window) {
    std::vector<uint64_t> seqs;
    const auto end = Clock::now() + window;
    while (Clock::now() < end) {
      auto m = router.recv(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()));
      if (m && std::holds_alternative<stream::Traj>(*m)) seqs.push_back(std::get<stream::Traj>(*m).seq);
    }
    return seqs;
  };
  EXPECT_EQ(collect(600ms), (std::vector<uint64_t>{1, 2, 3}));
  router.send_to(rid, stream::encode(stream::Ack{{{1, 1}}}));
  EXPECT_EQ(collect(600ms), (std::vector<uint64_t>{4}));
  router.send_to(rid, stream::encode(stream::Credit{5}));
  EXPECT_EQ(collect(600ms), (std::vector<uint64_t>{5, 6}));
  router.send_to(rid, stream::encode(stream::Ack{{{2, 6}}}));
  EXPECT_EQ(collect(600ms), (std::vector<uint64_t>{7, 8, 9, 10}));
  EXPECT_EQ(sender.stats().inflight, 4u);
  EXPECT_EQ(sender.stats().acked, 6u);
}

TEST_F(StreamTest, ASilentReceiverMakesTheSenderReconnectAndResendEverythingUnacknowledged) {
  RawPeer router(zmq::socket_type::router, "tcp://127.0.0.1:*", true);
  TrajectorySender sender(sender_config(router.endpoint(), "silence"));
  for (int i = 1; i <= 4; ++i) sender.write_value(trajectory("t" + std::to_string(i)));
  std::string rid1;
  ASSERT_TRUE(router.recv(5s, &rid1));
  router.send_to(rid1, stream::encode(stream::Welcome{1, "r", 100, 100, 1 << 20, 0}));
  std::vector<uint64_t> first;
  while (first.size() < 4) {
    auto m = router.recv(2s);
    ASSERT_TRUE(m);
    if (auto* t = std::get_if<stream::Traj>(&*m)) first.push_back(t->seq);
  }
  router.send_to(rid1, stream::encode(stream::Ack{{{2, 2}}}));
  // Then silence: no heartbeat, no ack. The sender gives up on the session
  // after its timeout (1 s) and says hello on a new connection.
  const auto t0 = Clock::now();
  std::string rid2;
  std::optional<stream::Message> m;
  do {
    m = router.recv(5s, &rid2);
    ASSERT_TRUE(m);
  } while (!std::holds_alternative<stream::Hello>(*m));
  EXPECT_NE(rid2, rid1);
  EXPECT_GE(Clock::now() - t0, 800ms);
  EXPECT_EQ(std::get<stream::Hello>(*m).unacked, 3u);
  router.send_to(rid2, stream::encode(stream::Welcome{1, "r", 100, 100, 1 << 20, 0}));
  std::vector<uint64_t> again;
  while (again.size() < 3) {
    auto t = router.recv(2s);
    ASSERT_TRUE(t);
    if (auto* tr = std::get_if<stream::Traj>(&*t)) again.push_back(tr->seq);
  }
  EXPECT_EQ(again, (std::vector<uint64_t>{1, 3, 4}));
  // The sender counts a batch once all of it is sent: the router can hold
  // the last trajectory before the counters move (seen under a full ctest).
  EXPECT_TRUE(eventually([&] { return sender.stats().resent == 3; })) << sender.stats().resent;
  EXPECT_EQ(sender.stats().reconnects, 1u);
  EXPECT_EQ(sender.stats().resent, 3u);
}

TEST_F(StreamTest, AReceiverRestartedOnItsStateLosesAndDuplicatesNothing) {
  // Both receivers bind the same endpoint, the one the sender knows.
  auto config = receiver_config();
  config.bind = TrajectoryReceiver(receiver_config(false)).endpoint();
  TrajectorySender sender(sender_config(config.bind, "restart"));
  for (int i = 0; i < 300; ++i) sender.write_value(trajectory("r" + std::to_string(i)));
  std::vector<DeliveryKey> first_run;
  {
    TrajectoryReceiver r1(config);
    // The first trainer acknowledges 100, then dies holding the rest.
    std::atomic<int> accepted{0};
    Trainer t1(r1, [&](const Delivery&) { return accepted++ < 100; });
    ASSERT_TRUE(eventually([&] { return t1.acked_count() >= 100 && t1.delivered().size() > 100; }));
    t1.stop();
    first_run = t1.acked();
    // r1 goes away holding deliveries the trainer never acknowledged, and
    // acks it recorded but may not have sent.
  }
  TrajectoryReceiver r2(config);
  Trainer t2(r2);
  EXPECT_TRUE(sender.flush(20s));
  t2.stop();
  std::set<DeliveryKey> acked;
  for (const auto& k : first_run) EXPECT_TRUE(acked.insert(k).second);
  for (const auto& k : t2.acked()) EXPECT_TRUE(acked.insert(k).second) << "acknowledged twice: seq " << k.seq;
  EXPECT_EQ(first_run.size(), 100u);
  EXPECT_EQ(acked.size(), 300u);
  EXPECT_EQ(sender.stats().unacked, 0u);
  EXPECT_GE(sender.stats().reconnects, 1u);
  EXPECT_GE(sender.stats().resent, 1u);
}

TEST_F(StreamTest, ARestartedSenderResendsOnlyWhatWasNotAcknowledged) {
  TrajectoryReceiver receiver(receiver_config());
  // The trainer holds on to odd seqs above 50 without acknowledging them.
  Trainer trainer(receiver, [](const Delivery& d) { return d.seq <= 50 || d.seq % 2 == 0; });
  {
    TrajectorySender s1(sender_config(receiver.endpoint(), "phoenix"));
    for (int i = 1; i <= 100; ++i) s1.write_value(trajectory("p" + std::to_string(i)));
    ASSERT_TRUE(eventually([&] { return s1.stats().acked == 75; }));
    EXPECT_FALSE(s1.flush(200ms));
  }  // the worker dies with 25 unacknowledged
  TrajectorySender s2(sender_config(receiver.endpoint(), "phoenix"));
  EXPECT_EQ(s2.stats().unacked, 25u);
  EXPECT_EQ(s2.stats().next_seq, 101u);
  // s2 sends the 25 again; the trainer holds them already, so they are not
  // delivered again. When the trainer acknowledges them, the acks reach s2.
  std::vector<DeliveryKey> held;
  for (const auto& d : trainer.delivered()) {
    if (d.seq > 50 && d.seq % 2 == 1) held.push_back(d.key());
  }
  ASSERT_EQ(held.size(), 25u);
  ASSERT_TRUE(eventually([&] { return receiver.stats().duplicates >= 25; }));
  EXPECT_EQ(receiver.ack(held), 25u);
  EXPECT_TRUE(s2.flush(10s));
  trainer.stop();
  std::set<DeliveryKey> delivered;
  for (const auto& d : trainer.delivered()) EXPECT_TRUE(delivered.insert(d.key()).second);
  EXPECT_EQ(delivered.size(), 100u);
}

TEST_F(StreamTest, TrajectoriesAboveTheReceiversLimitAreSetAsideNotResentForever) {
  auto rc = receiver_config();
  rc.max_message_bytes = 4096;
  TrajectoryReceiver receiver(rc);
  Trainer trainer(receiver);
  TrajectorySender sender(sender_config(receiver.endpoint(), "big"));
  sender.write_value(trajectory("small-1"));
  sender.write_value(trajectory("huge", 8000));
  sender.write_value(trajectory("small-2"));
  EXPECT_TRUE(sender.flush(10s));
  trainer.stop();
  EXPECT_EQ(trainer.delivered().size(), 2u);
  EXPECT_EQ(sender.stats().rejected, 1u);
  EXPECT_TRUE(fs::exists(root_ / "spool-big" / "rejected" / "2.msgpack"));
}

TEST_F(StreamTest, AFullSpoolBlocksWriteThenFailsWithAClearError) {
  SenderConfig c = sender_config("tcp://127.0.0.1:9", "nobody-listens");
  c.max_spool_bytes = 256 << 10;
  c.write_timeout = 300ms;
  TrajectorySender sender(c);
  const auto t0 = Clock::now();
  int written = 0;
  try {
    for (;; ++written) sender.write_value(trajectory("f" + std::to_string(written), 4000));
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("is full"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tcp://127.0.0.1:9"), std::string::npos) << e.what();
  }
  EXPECT_GE(Clock::now() - t0, 300ms);
  EXPECT_GT(written, 30);
  EXPECT_EQ(sender.stats().unacked, uint64_t(written));
}

TEST_F(StreamTest, BadConfigurationIsNamed) {
  auto c = sender_config("tcp://127.0.0.1:5557", "ok");
  c.worker_id = "has space";
  EXPECT_THROW(TrajectorySender{c}, InputError);
  c = sender_config("not an endpoint", "ok");
  try {
    TrajectorySender s(c);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not an endpoint"), std::string::npos);
  }
  c = sender_config("tcp://127.0.0.1:5557", "ok");
  c.heartbeat_timeout = c.heartbeat_interval;
  EXPECT_THROW(TrajectorySender{c}, InputError);
  auto rc = receiver_config();
  rc.bind = "tcp://256.1.1.1:1";
  EXPECT_THROW(TrajectoryReceiver{rc}, InputError);
  rc = receiver_config();
  rc.credit = 0;
  EXPECT_THROW(TrajectoryReceiver{rc}, InputError);
  TrajectorySender s(sender_config("tcp://127.0.0.1:5557", "ids"));
  EXPECT_THROW(s.write_value(json{{"no_id", 1}}), InputError);
  EXPECT_THROW(s.write_value(json{{"id", ""}}), InputError);
  EXPECT_THROW(s.write_encoded("x", "not msgpack map"), InputError);
}

TEST_F(StreamTest, CurveAdmitsOnlyAuthorizedSenders) {
  const CurveKeyPair server = generate_curve_keypair();
  const CurveKeyPair good = generate_curve_keypair();
  const CurveKeyPair other = generate_curve_keypair();
  auto rc = receiver_config();
  rc.curve.secret_key = server.secret_key;
  rc.curve.authorized_keys = {good.public_key};
  TrajectoryReceiver receiver(rc);
  Trainer trainer(receiver);

  auto sc = sender_config(receiver.endpoint(), "trusted");
  sc.curve.server_public_key = server.public_key;
  sc.curve.secret_key = good.secret_key;
  TrajectorySender trusted(sc);
  trusted.write_value(trajectory("secret-1"));
  EXPECT_TRUE(trusted.flush(10s));

  auto uc = sender_config(receiver.endpoint(), "intruder");
  uc.curve.server_public_key = server.public_key;
  uc.curve.secret_key = other.secret_key;
  TrajectorySender intruder(uc);
  intruder.write_value(trajectory("forged"));
  auto pc = sender_config(receiver.endpoint(), "plain");
  TrajectorySender plain(pc);
  plain.write_value(trajectory("cleartext"));
  EXPECT_FALSE(intruder.flush(1500ms));
  EXPECT_FALSE(plain.flush(10ms));
  trainer.stop();
  ASSERT_EQ(trainer.delivered().size(), 1u);
  EXPECT_EQ(trainer.delivered()[0].id, "secret-1");
}

TEST_F(StreamTest, CurveCertificatesRoundTripThroughFiles) {
  const CurveKeyPair keys = generate_curve_keypair();
  write_curve_certificates(root_ / "keys" / "trainer", keys);
  const CurveKeyPair secret = load_curve_certificate(root_ / "keys" / "trainer.key_secret");
  EXPECT_EQ(secret.public_key, keys.public_key);
  EXPECT_EQ(secret.secret_key, keys.secret_key);
  const CurveKeyPair pub = load_curve_certificate(root_ / "keys" / "trainer.key");
  EXPECT_EQ(pub.public_key, keys.public_key);
  EXPECT_TRUE(pub.secret_key.empty());
  EXPECT_EQ(curve_public_key(keys.secret_key), keys.public_key);
  EXPECT_EQ(load_authorized_keys(root_ / "keys"), std::vector<std::string>{keys.public_key});
  EXPECT_EQ((fs::status(root_ / "keys" / "trainer.key_secret").permissions() & fs::perms::others_read),
            fs::perms::none);
  EXPECT_THROW(write_curve_certificates(root_ / "keys" / "trainer", keys), InputError);
  EXPECT_THROW(resolve_curve_key((root_ / "keys" / "trainer.key").string(), true, "the secret key"), InputError);
  EXPECT_EQ(resolve_curve_key(keys.public_key, false, "k"), keys.public_key);
  EXPECT_THROW(resolve_curve_key("garbage", false, "the server key"), InputError);
}

TEST_F(StreamTest, TheSinkInterfaceTakesTrajectoryValues) {
  TrajectoryReceiver receiver(receiver_config(false));
  Trainer trainer(receiver);
  TrajectorySender sender(sender_config(receiver.endpoint(), "sink"));
  TrajectorySink& sink = sender;
  Trajectory t;
  t.id = "typed-1";
  t.task_id = "task";
  t.turns.resize(2);
  t.turns[1].reward = 0.5;
  t.total_reward = 0.5;
  sink.write(t);
  EXPECT_TRUE(sink.flush(10s));
  trainer.stop();
  ASSERT_EQ(trainer.delivered().size(), 1u);
  const Trajectory back = parse_trajectory(Document::from_value(trainer.delivered()[0].trajectory(), "<wire>"));
  EXPECT_EQ(back.id, "typed-1");
  EXPECT_EQ(back.turns.size(), 2u);
  EXPECT_EQ(back.total_reward, 0.5);
}

}  // namespace
}  // namespace kforge::rollout
