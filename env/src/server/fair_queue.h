// Whose request the env server takes next (docs/threat-model.md, "How the socket thread shares
// itself between clients"). Each client's requests wait in the client's own queue, and the socket
// thread takes one request per client in turn from a ring of clients with requests waiting, not in
// the order their bytes arrived: a client that sends a thousand requests makes every other client
// wait for one of them at most. A refused request (an error reply) puts its client in the penalty
// box for kRefusalPenalty times what the request cost the server; its next request is taken when
// that wait is over. The per-client bounds are here too: requests and bytes waiting, and steps and
// resets in flight.
//
// No sockets and no clock: the caller passes the time, so that tests/server/fair_queue_test.cpp
// drives the rules by hand. The socket loop (socket_loop.cpp, Server::Impl::handle_queued) reads
// messages into push(), takes them from next() and ends each turn with end_turn(). Not
// thread-safe: the socket thread alone uses it.
//
//   FairQueue<std::string> q(FairQueueLimits{});
//   q.push("a", "a1", 2, now); q.push("a", "a2", 2, now); q.push("b", "b1", 2, now);
//   auto t = q.next(now);             // a's "a1"
//   q.end_turn(t->client, false, 0ns, now);
//   q.next(now);                      // b's "b1": one request per client in turn
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kforge::env::server {

using Clock = std::chrono::steady_clock;

// A refused request costs its client this many times what it cost the
// server before the client's next request is taken: a client that sends only
// bad requests gets at most 1/kRefusalPenalty (2%) of the socket thread,
// and, waiting for its replies, stops sending. Refused: an error reply (a
// typed action that does not parse is one), or a reset refused on its reset
// thread; a policy's invalid tool call is an observation, not a refusal. The
// cost is the socket thread's time for the request, plus the decoder's and
// the reset thread's CPU time where they had a part. An honest client's
// occasional error (env_busy, ~10 us) costs it half a millisecond.
// (bench/server: 8 hostile clients took honest p99 from 5.8 ms to 109 ms
// before this; see docs/threat-model.md.)
constexpr int kRefusalPenalty = 50;

struct FairQueueLimits {
  // Requests and bytes one client may have waiting; beyond them push()
  // refuses (the server answers too_many_requests unread).
  size_t max_queued = 512;
  size_t max_queued_bytes = size_t{80} << 20;
  // Steps and resets one client may have in flight at once.
  int max_inflight = 256;
  int refusal_penalty = kRefusalPenalty;
};

// Request: what waits in a queue (the server's: a message read off the
// socket); only moved.
template <class Request>
class FairQueue {
 public:
  struct Turn {
    std::string client;
    Request request;
  };

  FairQueue() = default;
  explicit FairQueue(FairQueueLimits limits) : limits_(limits) {}

  // Queues a client's request of `bytes` bytes; the client is known from its
  // first request on (until forget()). False, and `request` left as it was,
  // when the client already has max_queued requests or would have more than
  // max_queued_bytes waiting.
  bool push(const std::string& client, Request&& request, size_t bytes, Clock::time_point now) {
    Client& c = clients_[client];
    if (c.queue.size() >= limits_.max_queued || c.queued_bytes + bytes > limits_.max_queued_bytes) return false;
    c.queued_bytes += bytes;
    c.queue.emplace_back(std::move(request), bytes);
    schedule(client, c, now);
    return true;
  }

  // The next request to handle: the oldest request of the client at the
  // front of the ring, after the clients whose penalty ended by `now` joined
  // the ring's back (earliest end first). A client found penalized meanwhile
  // (a reset refused on its reset thread) goes to the penalty box instead.
  // The client is out of the ring until end_turn(): its turn is open.
  // nullopt: nobody's request may be taken now.
  std::optional<Turn> next(Clock::time_point now) {
    while (!penalty_box_.empty() && penalty_box_.begin()->first <= now) {
      ready_.push_back(std::move(penalty_box_.begin()->second));
      penalty_box_.erase(penalty_box_.begin());
    }
    while (!ready_.empty()) {
      std::string id = std::move(ready_.front());
      ready_.pop_front();
      auto it = clients_.find(id);
      if (it == clients_.end()) continue;  // forgotten since
      Client& c = it->second;
      if (c.queue.empty()) {
        c.scheduled = false;
        continue;
      }
      if (c.not_before > now) {
        penalty_box_.emplace(c.not_before, std::move(id));
        continue;
      }
      Turn turn{std::move(id), std::move(c.queue.front().first)};
      c.queued_bytes -= c.queue.front().second;
      c.queue.pop_front();
      c.scheduled = false;
      return turn;
    }
    return std::nullopt;
  }

  // The request of the client's open turn is being handled elsewhere (the
  // decoder thread): its later requests wait, so that they keep their order,
  // until take_back() and end_turn().
  void set_aside(const std::string& client) {
    if (auto it = clients_.find(client); it != clients_.end()) it->second.aside = true;
  }
  // The request set aside is back; false when the client was forgotten
  // meanwhile (its request is then dropped unanswered).
  bool take_back(const std::string& client) {
    auto it = clients_.find(client);
    if (it == clients_.end() || !it->second.aside) return false;
    it->second.aside = false;
    return true;
  }

  // Ends the client's open turn: a refused request costs the client
  // refusal_penalty times `cost`; with requests still waiting, the client
  // goes to the back of the ring, or to the penalty box until its wait is
  // over.
  void end_turn(const std::string& client, bool refused, std::chrono::nanoseconds cost, Clock::time_point now) {
    auto it = clients_.find(client);
    if (it == clients_.end()) return;
    if (refused) penalize(it->second, cost, now);
    if (!it->second.queue.empty()) schedule(client, it->second, now);
  }
  // A refusal found outside the client's turn (a reset refused on its reset
  // thread). Penalties add up: eight refusals in a row cost eight times one.
  void penalize(const std::string& client, std::chrono::nanoseconds cost, Clock::time_point now) {
    if (auto it = clients_.find(client); it != clients_.end()) penalize(it->second, cost, now);
  }

  // For the socket loop's poll: whether next() has a request now, and else
  // when the first penalty ends.
  bool has_ready() const { return !ready_.empty(); }
  std::optional<Clock::time_point> first_penalty_end() const {
    if (penalty_box_.empty()) return std::nullopt;
    return penalty_box_.begin()->first;
  }

  // Steps and resets in flight: a client at the limit is refused more
  // (too_many_requests) until started ones finish.
  bool at_inflight_limit(const std::string& client) const { return inflight(client) >= limits_.max_inflight; }
  int inflight(const std::string& client) const {
    auto it = clients_.find(client);
    return it == clients_.end() ? 0 : it->second.inflight;
  }
  void started(const std::string& client) {
    if (auto it = clients_.find(client); it != clients_.end()) ++it->second.inflight;
  }
  // A step or reset finished: the client counts as seen.
  void finished(const std::string& client, Clock::time_point now) {
    auto it = clients_.find(client);
    if (it == clients_.end()) return;
    --it->second.inflight;
    it->second.last_seen = now;
  }

  // A request of the client was read (decoded): the idle timeout starts over.
  void seen(const std::string& client, Clock::time_point now) {
    if (auto it = clients_.find(client); it != clients_.end()) it->second.last_seen = now;
  }
  Clock::time_point last_seen(const std::string& client) const {
    auto it = clients_.find(client);
    return it == clients_.end() ? Clock::time_point{} : it->second.last_seen;
  }
  bool contains(const std::string& client) const { return clients_.count(client) != 0; }
  size_t queued(const std::string& client) const {
    auto it = clients_.find(client);
    return it == clients_.end() ? 0 : it->second.queue.size();
  }
  size_t queued_bytes(const std::string& client) const {
    auto it = clients_.find(client);
    return it == clients_.end() ? 0 : it->second.queued_bytes;
  }
  // Clients with nothing waiting, set aside, in flight or left to serve of a
  // penalty, in id order: those the server may forget (housekeeping).
  std::vector<std::string> quiet_clients(Clock::time_point now) const {
    std::vector<std::string> quiet;
    for (const auto& [id, c] : clients_) {
      if (c.inflight > 0 || !c.queue.empty() || c.aside || c.not_before > now) continue;
      quiet.push_back(id);
    }
    return quiet;
  }
  // Drops the client and its waiting requests; its places in the ring and the
  // penalty box are skipped when they come up.
  void forget(const std::string& client) { clients_.erase(client); }

 private:
  struct Client {
    std::deque<std::pair<Request, size_t>> queue;  // requests and their bytes
    size_t queued_bytes = 0;
    bool scheduled = false;        // in the ready ring or the penalty box
    bool aside = false;            // its open turn's request is on the decoder thread
    Clock::time_point not_before;  // a refusal's penalty: no request is taken before this
    int inflight = 0;
    Clock::time_point last_seen;
  };

  void schedule(const std::string& id, Client& c, Clock::time_point now) {
    if (c.scheduled || c.aside) return;
    c.scheduled = true;
    if (c.not_before > now) {
      penalty_box_.emplace(c.not_before, id);
    } else {
      ready_.push_back(id);
    }
  }
  void penalize(Client& c, std::chrono::nanoseconds cost, Clock::time_point now) {
    c.not_before = std::max(c.not_before, now) + limits_.refusal_penalty * cost;
  }

  FairQueueLimits limits_;
  std::map<std::string, Client> clients_;
  // Clients with requests waiting, one request each in turn; ids of clients
  // forgotten since are skipped when they come up.
  std::deque<std::string> ready_;
  std::multimap<Clock::time_point, std::string> penalty_box_;  // back in the ring once their time comes
};

}  // namespace kforge::env::server
