// The env server's fairness rules (env/src/server/fair_queue.h), driven by hand: no sockets, no
// clock. Who goes next across clients, the penalty box, the per-client bounds. The server's own
// tests (hostile_input_test.cpp) check the same rules end to end over a socket.
#include "server/fair_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace kforge::env::server {
namespace {

using std::chrono::milliseconds;
using Queue = FairQueue<std::string>;

const Clock::time_point kT0 = Clock::time_point{} + std::chrono::hours(1);

// Requests are named "<client><n>" and cost one byte per character.
void push(Queue& q, const std::string& request, Clock::time_point now = kT0) {
  std::string r = request;
  ASSERT_TRUE(q.push(request.substr(0, 1), std::move(r), request.size(), now)) << request;
}

// Takes requests until none is ready at `now`, ending each turn without a
// refusal; returns them in the order taken.
std::vector<std::string> drain(Queue& q, Clock::time_point now = kT0) {
  std::vector<std::string> order;
  while (std::optional<Queue::Turn> t = q.next(now)) {
    EXPECT_EQ(t->client, t->request.substr(0, 1));
    order.push_back(t->request);
    q.end_turn(t->client, false, milliseconds(0), now);
  }
  return order;
}

std::string take(Queue& q, Clock::time_point now = kT0) {
  std::optional<Queue::Turn> t = q.next(now);
  return t ? t->request : "(none)";
}

TEST(FairQueueTest, ClientsAreServedOneRequestEachInTurn) {
  Queue q(FairQueueLimits{});
  for (const char* r : {"a1", "a2", "a3", "b1", "c1", "c2"}) push(q, r);
  EXPECT_EQ(drain(q), (std::vector<std::string>{"a1", "b1", "c1", "a2", "c2", "a3"}));
  EXPECT_FALSE(q.has_ready());
  EXPECT_EQ(q.first_penalty_end(), std::nullopt);
}

TEST(FairQueueTest, AClientThatArrivesLateQueuesBehindThoseAlreadyInTheRing) {
  Queue q(FairQueueLimits{});
  for (const char* r : {"a1", "a2", "a3"}) push(q, r);
  std::optional<Queue::Turn> t = q.next(kT0);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->request, "a1");
  q.end_turn("a", false, milliseconds(0), kT0);  // a goes to the back of the ring: [a]
  push(q, "b1");                                 // [a, b]
  EXPECT_EQ(drain(q), (std::vector<std::string>{"a2", "b1", "a3"}));
}

TEST(FairQueueTest, AClientIsOutOfTheRingWhileItsTurnIsOpen) {
  Queue q(FairQueueLimits{});
  for (const char* r : {"a1", "a2", "b1", "b2"}) push(q, r);
  EXPECT_EQ(take(q), "a1");  // a's turn stays open
  EXPECT_EQ(take(q), "b1");
  EXPECT_EQ(take(q), "(none)");  // b's turn is open too
  q.end_turn("b", false, milliseconds(0), kT0);
  q.end_turn("a", false, milliseconds(0), kT0);
  EXPECT_EQ(drain(q), (std::vector<std::string>{"b2", "a2"}));  // in the order the turns ended
}

TEST(FairQueueTest, ARequestSetAsideHoldsItsClientsLaterRequestsInOrder) {
  Queue q(FairQueueLimits{});
  for (const char* r : {"a1", "a2", "b1", "b2"}) push(q, r);
  EXPECT_EQ(take(q), "a1");
  q.set_aside("a");  // a1 is being decoded elsewhere
  push(q, "a3");     // queued behind a2, a not scheduled
  EXPECT_EQ(drain(q), (std::vector<std::string>{"b1", "b2"}));
  EXPECT_TRUE(q.take_back("a"));
  EXPECT_FALSE(q.take_back("a"));  // only once
  q.end_turn("a", false, milliseconds(0), kT0);
  EXPECT_EQ(drain(q), (std::vector<std::string>{"a2", "a3"}));
}

TEST(FairQueueTest, ARequestSetAsideByAClientForgottenMeanwhileIsNotTakenBack) {
  Queue q(FairQueueLimits{});
  push(q, "a1");
  EXPECT_EQ(take(q), "a1");
  q.set_aside("a");
  q.forget("a");
  EXPECT_FALSE(q.take_back("a"));
  EXPECT_FALSE(q.contains("a"));
}

TEST(FairQueueTest, ARefusedRequestCostsItsClientFiftyTimesItsCostInThePenaltyBox) {
  Queue q(FairQueueLimits{});
  for (const char* r : {"a1", "a2", "b1", "b2"}) push(q, r);
  EXPECT_EQ(take(q), "a1");
  q.end_turn("a", true, milliseconds(2), kT0);  // refused after 2 ms: a waits 100 ms
  EXPECT_EQ(q.first_penalty_end(), kT0 + milliseconds(100));
  EXPECT_EQ(drain(q), (std::vector<std::string>{"b1", "b2"}));  // b is served meanwhile
  EXPECT_EQ(take(q, kT0 + milliseconds(99)), "(none)");
  EXPECT_FALSE(q.has_ready());
  EXPECT_EQ(take(q, kT0 + milliseconds(100)), "a2");
  EXPECT_EQ(q.first_penalty_end(), std::nullopt);
}

TEST(FairQueueTest, AnAcceptedRequestCostsNothingWhateverItsCost) {
  Queue q(FairQueueLimits{});
  for (const char* r : {"a1", "a2"}) push(q, r);
  EXPECT_EQ(take(q), "a1");
  q.end_turn("a", false, std::chrono::seconds(5), kT0);
  EXPECT_EQ(take(q), "a2");
}

TEST(FairQueueTest, PenaltiesAddUp) {
  Queue q(FairQueueLimits{});
  for (const char* r : {"a1", "a2", "a3"}) push(q, r);
  EXPECT_EQ(take(q), "a1");
  q.end_turn("a", true, milliseconds(1), kT0);  // until kT0 + 50 ms
  // A second refusal found while a waits (a reset refused on its reset
  // thread) adds its 50 ms to the end of the first, not to now.
  q.penalize("a", milliseconds(1), kT0 + milliseconds(10));
  EXPECT_EQ(take(q, kT0 + milliseconds(99)), "(none)");
  EXPECT_EQ(take(q, kT0 + milliseconds(100)), "a2");
  // A refusal after the penalty is over starts from now.
  q.end_turn("a", true, milliseconds(1), kT0 + milliseconds(200));
  EXPECT_EQ(q.first_penalty_end(), kT0 + milliseconds(250));
  EXPECT_EQ(take(q, kT0 + milliseconds(250)), "a3");
}

TEST(FairQueueTest, AClientPenalizedWhileInTheRingIsMovedToThePenaltyBoxWhenItsTurnComes) {
  Queue q(FairQueueLimits{});
  for (const char* r : {"a1", "b1"}) push(q, r);
  q.penalize("a", milliseconds(1), kT0);  // a refused reset of a's came back
  EXPECT_TRUE(q.has_ready());
  EXPECT_EQ(take(q), "b1");  // a was skipped
  q.end_turn("b", false, milliseconds(0), kT0);
  EXPECT_EQ(q.first_penalty_end(), kT0 + milliseconds(50));
  EXPECT_EQ(take(q, kT0 + milliseconds(50)), "a1");
}

TEST(FairQueueTest, APenalizedClientsNextRequestWaitsEvenIfItArrivesLater) {
  Queue q(FairQueueLimits{});
  push(q, "a1");
  EXPECT_EQ(take(q), "a1");
  q.end_turn("a", true, milliseconds(1), kT0);  // nothing else waiting: not scheduled
  EXPECT_EQ(q.first_penalty_end(), std::nullopt);
  push(q, "a2", kT0 + milliseconds(10));  // straight into the penalty box
  EXPECT_FALSE(q.has_ready());
  EXPECT_EQ(q.first_penalty_end(), kT0 + milliseconds(50));
  EXPECT_EQ(take(q, kT0 + milliseconds(49)), "(none)");
  EXPECT_EQ(take(q, kT0 + milliseconds(50)), "a2");
}

TEST(FairQueueTest, ClientsOutOfThePenaltyBoxJoinTheRingsBackInTheOrderTheirPenaltiesEnd) {
  Queue q(FairQueueLimits{});
  for (const char* r : {"a1", "a2", "b1", "b2", "c1", "c2", "c3"}) push(q, r);
  EXPECT_EQ(take(q), "a1");
  q.end_turn("a", true, milliseconds(2), kT0);  // a until kT0 + 100 ms
  EXPECT_EQ(take(q), "b1");
  q.end_turn("b", true, milliseconds(1), kT0);  // b until kT0 + 50 ms
  EXPECT_EQ(take(q), "c1");
  q.end_turn("c", false, milliseconds(0), kT0);  // ring: [c]
  const auto later = kT0 + milliseconds(100);
  // Both penalties are over: b, whose ended first, then a join behind c.
  EXPECT_EQ(drain(q, later), (std::vector<std::string>{"c2", "b2", "a2", "c3"}));
}

TEST(FairQueueTest, RequestsBeyondAClientsQueueBoundAreRefusedAndLeftToTheCaller) {
  FairQueueLimits limits;
  limits.max_queued = 2;
  limits.max_queued_bytes = 1000;
  Queue q(limits);
  push(q, "a1");
  push(q, "a2");
  std::string a3 = "a3";
  EXPECT_FALSE(q.push("a", std::move(a3), 2, kT0));
  EXPECT_EQ(a3, "a3");  // the caller still has it, to peek at its id
  EXPECT_EQ(q.queued("a"), 2u);
  EXPECT_EQ(q.queued_bytes("a"), 4u);
  push(q, "b1");  // another client's queue is its own
  EXPECT_EQ(take(q), "a1");
  q.end_turn("a", false, milliseconds(0), kT0);
  push(q, "a3");  // room again
  EXPECT_EQ(drain(q), (std::vector<std::string>{"b1", "a2", "a3"}));
}

TEST(FairQueueTest, BytesBeyondAClientsQueueBoundAreRefused) {
  FairQueueLimits limits;
  limits.max_queued_bytes = 10;
  Queue q(limits);
  push(q, "a-six");  // 5 bytes
  push(q, "a-4");    // 3 bytes: 8
  std::string big = "a-3b";
  EXPECT_FALSE(q.push("a", std::move(big), 4, kT0));  // would be 12
  push(q, "a-");                                      // 2 bytes: exactly 10
  EXPECT_EQ(q.queued_bytes("a"), 10u);
  EXPECT_EQ(take(q), "a-six");
  EXPECT_EQ(q.queued_bytes("a"), 5u);
}

TEST(FairQueueTest, StepsAndResetsInFlightAreBoundedPerClient) {
  FairQueueLimits limits;
  limits.max_inflight = 2;
  Queue q(limits);
  push(q, "a1");
  push(q, "b1");
  q.started("a");
  EXPECT_FALSE(q.at_inflight_limit("a"));
  q.started("a");
  EXPECT_TRUE(q.at_inflight_limit("a"));
  EXPECT_EQ(q.inflight("a"), 2);
  EXPECT_FALSE(q.at_inflight_limit("b"));  // per client
  q.finished("a", kT0 + milliseconds(7));
  EXPECT_FALSE(q.at_inflight_limit("a"));
  EXPECT_EQ(q.inflight("a"), 1);
  EXPECT_EQ(q.last_seen("a"), kT0 + milliseconds(7));  // a finished step counts as a sign of life
}

TEST(FairQueueTest, QuietClientsAreThoseWithNothingWaitingInFlightAsideOrPenalized) {
  Queue q(FairQueueLimits{});
  for (const char* r : {"a1", "b1", "c1", "d1", "e1"}) push(q, r);
  // a: a request still waits. b: in flight. c: penalized. d: set aside. e: quiet.
  EXPECT_EQ(drain(q), (std::vector<std::string>{"a1", "b1", "c1", "d1", "e1"}));
  push(q, "a2");
  q.started("b");
  q.penalize("c", milliseconds(1), kT0);
  EXPECT_EQ(take(q), "a2");
  q.end_turn("a", false, milliseconds(0), kT0);
  push(q, "d2");
  EXPECT_EQ(take(q), "d2");
  q.set_aside("d");
  push(q, "a3");
  EXPECT_EQ(q.quiet_clients(kT0), (std::vector<std::string>{"e"}));
  EXPECT_EQ(q.quiet_clients(kT0 + milliseconds(50)), (std::vector<std::string>{"c", "e"}));
}

TEST(FairQueueTest, AForgottenClientsPlaceInTheRingIsSkipped) {
  Queue q(FairQueueLimits{});
  for (const char* r : {"a1", "b1", "c1"}) push(q, r);
  q.forget("b");
  EXPECT_FALSE(q.contains("b"));
  EXPECT_EQ(q.queued("b"), 0u);
  EXPECT_EQ(drain(q), (std::vector<std::string>{"a1", "c1"}));
}

}  // namespace
}  // namespace kforge::env::server
