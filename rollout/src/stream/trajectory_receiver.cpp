#include "kforge/rollout/stream/trajectory_receiver.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <zmq.hpp>

#include "curve_socket.h"
#include "kforge/core/endpoint.h"
#include "kforge/core/msgpack.h"
#include "kforge/core/unique_fd.h"
#include "kforge/rollout/stream/receiver_state.h"
#include "kforge/rollout/stream/stream_protocol.h"

namespace kforge::rollout {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string random_id() {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 2; ++i) {
    uint32_t x = rd();
    for (int j = 0; j < 8; ++j, x >>= 4) out += kHex[x & 15];
  }
  return out;
}

std::string printable(const std::string& routing_id) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "0x";
  for (unsigned char c : routing_id) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace

json Delivery::trajectory() const { return msgpack::decode(data, stream::kMaxDataDepth); }

struct TrajectoryReceiver::Impl {
  struct Session {
    std::string worker;
    std::string instance;
    Clock::time_point last_recv, last_send;
    std::set<uint64_t> inflight;  // received on this session, not yet acknowledged to it
    uint64_t credit = 0;          // the largest credit granted to this session
  };

  ReceiverConfig config;
  std::function<void(const std::string&)> log;
  std::string receiver_id = random_id();
  zmq::context_t ctx{1};
  std::unique_ptr<internal::ZapHandler> zap;
  zmq::socket_t router;
  std::string endpoint;
  UniqueFd wake_fd;
  std::atomic<bool> stopping{false};
  std::thread io;

  mutable std::mutex mu;
  std::condition_variable ready_cv;
  ReceiverState state;
  std::deque<Delivery> queue;
  // Queued (false) or delivered (true) to the trainer, not acknowledged.
  std::unordered_map<std::string, std::unordered_map<uint64_t, bool>> pending;
  uint64_t delivered_unacked = 0;
  std::vector<std::pair<std::string, std::vector<uint64_t>>> outgoing;  // acks for the I/O thread to send
  std::optional<uint64_t> new_credit;
  ReceiverStats counters;

  // The I/O thread's alone.
  std::unordered_map<std::string, Session> sessions;  // by routing id
  std::unordered_map<std::string, std::string> session_of_worker;
  uint64_t credit;
  Clock::time_point next_housekeeping;

  explicit Impl(ReceiverConfig c)
      : config(std::move(c)),
        log(config.log ? config.log : std::function<void(const std::string&)>([](const std::string& m) {
          std::fprintf(stderr, "kforge stream receiver: %s\n", m.c_str());
        })),
        router(ctx, zmq::socket_type::router),
        state(config.state_dir, config.fsync),
        credit(config.credit) {
    router.set(zmq::sockopt::router_mandatory, 1);
    router.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(config.max_message_bytes));
    router.set(zmq::sockopt::linger, 0);
    router.set(zmq::sockopt::sndhwm, 0);
    if (config.curve.enabled()) {
      if (!config.curve.authorized_keys.empty()) {
        zap = std::make_unique<internal::ZapHandler>(ctx, config.curve.authorized_keys);
      }
      internal::apply_curve_server(router, config.curve);
    }
    try {
      router.bind(config.bind);
    } catch (const zmq::error_t& e) {
      throw InputError("trajectory receiver: cannot bind \"" + config.bind + "\": " + e.what());
    }
    endpoint = router.get(zmq::sockopt::last_endpoint);
    if (!is_local_endpoint(config.bind) && !config.curve.enabled()) {
      log("warning: " + endpoint +
          " is reachable from other hosts and CurveZMQ is off: anyone who can reach it can send trajectories "
          "to the trainer (see trainer_bridge/STREAM.md, \"CurveZMQ\")");
    }
    wake_fd.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!wake_fd) throw SystemError("trajectory receiver: eventfd failed");
    io = std::thread([this] { run(); });
  }

  ~Impl() {
    stopping = true;
    wake();
    if (io.joinable()) io.join();
    router.close();
    zap.reset();
  }

  void wake() const {
    const uint64_t one = 1;
    (void)!::write(wake_fd.get(), &one, sizeof one);
  }

  // ---- sending -----------------------------------------------------------

  // False when the peer is gone (its session is dropped then).
  bool send_to(const std::string& routing_id, const std::string& frame) {
    try {
      const bool ok = router.send(zmq::buffer(routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait) &&
                      router.send(zmq::buffer(frame), zmq::send_flags::dontwait);
      if (ok) {
        if (auto it = sessions.find(routing_id); it != sessions.end()) it->second.last_send = Clock::now();
        return true;
      }
    } catch (const zmq::error_t& e) {
      if (e.num() != EHOSTUNREACH) log(std::string("send failed: ") + e.what());
    }
    drop_session(routing_id, "its connection is gone");
    return false;
  }

  void send_error(const std::string& routing_id, stream::ErrorCode code, const std::string& message,
                  std::optional<uint64_t> seq = std::nullopt, std::vector<int> versions = {}) {
    stream::Error e;
    e.code = stream::error_code_name(code);
    e.message = message;
    e.seq = seq;
    e.versions = std::move(versions);
    try {
      router.send(zmq::buffer(routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      router.send(zmq::buffer(stream::encode(e)), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // The peer is gone; nothing to tell it.
    }
  }

  void drop_session(const std::string& routing_id, const std::string& why) {
    auto it = sessions.find(routing_id);
    if (it == sessions.end()) return;
    log("worker " + it->second.worker + " disconnected (" + why + ")");
    auto w = session_of_worker.find(it->second.worker);
    if (w != session_of_worker.end() && w->second == routing_id) session_of_worker.erase(w);
    sessions.erase(it);
    std::lock_guard<std::mutex> lock(mu);
    counters.sessions_live = sessions.size();
  }

  // ---- the I/O thread ------------------------------------------------------

  void run() {
    while (!stopping) {
      zmq::pollitem_t items[2] = {{router.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd.get(), ZMQ_POLLIN, 0}};
      const auto interval = std::max(milliseconds(1), config.heartbeat_interval / 4);
      try {
        zmq::poll(items, 2, std::min(interval, milliseconds(100)));
        if (items[1].revents & ZMQ_POLLIN) {
          uint64_t count;
          (void)!::read(wake_fd.get(), &count, sizeof count);
        }
        send_outgoing();
        if (items[0].revents & ZMQ_POLLIN) {
          for (int i = 0; i < 4096; ++i) {
            std::vector<zmq::message_t> frames;
            zmq::message_t part;
            if (!router.recv(part, zmq::recv_flags::dontwait)) break;
            frames.push_back(std::move(part));
            while (frames.back().more() && frames.size() < 8) {
              zmq::message_t more;
              if (!router.recv(more, zmq::recv_flags::dontwait)) break;
              frames.push_back(std::move(more));
            }
            // Drain frames past the limit, which only a broken peer sends.
            while (frames.back().more()) {
              zmq::message_t rest;
              if (!router.recv(rest, zmq::recv_flags::dontwait)) break;
              frames.back() = std::move(rest);
            }
            handle(frames);
            if (i % 64 == 63) send_outgoing();  // acks first, so that senders are not starved
          }
        }
        if (Clock::now() >= next_housekeeping) housekeeping();
      } catch (const std::exception& e) {
        log(std::string("error: ") + e.what());
      }
    }
    // Acks the trainer gave last still go out; the socket waits up to a
    // second for them when it closes.
    try {
      send_outgoing();
      router.set(zmq::sockopt::linger, 1000);
    } catch (const std::exception& e) {
      log(std::string("error: ") + e.what());
    }
  }

  void housekeeping() {
    const auto now = Clock::now();
    next_housekeeping = now + std::max(milliseconds(1), config.heartbeat_interval / 4);
    // Collected first: a failed send drops its session from the map.
    std::vector<std::string> silent, due;
    for (const auto& [rid, s] : sessions) {
      if (now - s.last_recv > config.heartbeat_timeout) {
        silent.push_back(rid);
      } else if (now - s.last_send >= config.heartbeat_interval) {
        due.push_back(rid);
      }
    }
    for (const auto& rid : silent) {
      drop_session(rid, "nothing heard for " + std::to_string(config.heartbeat_timeout.count()) + " ms");
    }
    const std::string heartbeat = stream::encode(stream::Heartbeat{});
    for (const auto& rid : due) send_to(rid, heartbeat);
  }

  void send_outgoing() {
    std::vector<std::pair<std::string, std::vector<uint64_t>>> acks;
    std::optional<uint64_t> changed;
    {
      std::lock_guard<std::mutex> lock(mu);
      acks.swap(outgoing);
      changed.swap(new_credit);
    }
    if (changed) {
      credit = *changed;
      std::vector<std::string> ids;
      for (auto& [rid, s] : sessions) {
        s.credit = std::max(s.credit, credit);
        ids.push_back(rid);
      }
      for (const auto& rid : ids) send_to(rid, stream::encode(stream::Credit{credit}));
    }
    for (auto& [worker, seqs] : acks) {
      auto w = session_of_worker.find(worker);
      // A worker without a session gets the ack as a duplicate's answer when
      // it sends the trajectory again.
      if (w == session_of_worker.end()) continue;
      const std::string rid = w->second;
      Session& s = sessions.at(rid);
      for (uint64_t seq : seqs) s.inflight.erase(seq);
      stream::Ack a;
      a.ranges = stream::to_ranges(std::move(seqs));
      send_to(rid, stream::encode(a));
    }
  }

  void handle(std::vector<zmq::message_t>& frames) {
    const std::string rid = frames[0].to_string();
    if (frames.size() != 2) {
      count_error();
      send_error(rid, stream::ErrorCode::kBadMessage, "a message is one frame (one MessagePack map)");
      return;
    }
    stream::Message m;
    try {
      m = stream::decode(frames[1].to_string_view());
    } catch (const stream::DecodeError& e) {
      if (e.traj_seq && sessions.count(rid)) {
        {
          std::lock_guard<std::mutex> lock(mu);
          ++counters.rejected;
        }
        log("rejected seq " + std::to_string(*e.traj_seq) + " of worker " + sessions.at(rid).worker + ": " + e.what());
        send_error(rid, stream::ErrorCode::kRejected, e.what(), e.traj_seq);
      } else {
        count_error();
        send_error(rid, stream::ErrorCode::kBadMessage, e.what());
      }
      return;
    }
    auto it = sessions.find(rid);
    if (it != sessions.end()) it->second.last_recv = Clock::now();
    if (const auto* h = std::get_if<stream::Hello>(&m)) return on_hello(rid, *h);
    if (const auto* t = std::get_if<stream::Traj>(&m)) {
      if (it == sessions.end()) {
        return send_error(rid, stream::ErrorCode::kNoSession, "no session for this connection: send hello", t->seq);
      }
      return on_traj(rid, it->second, std::get<stream::Traj>(std::move(m)));
    }
    if (std::holds_alternative<stream::Heartbeat>(m)) {
      if (it == sessions.end()) {
        send_error(rid, stream::ErrorCode::kNoSession, "no session for this connection: send hello");
      }
      return;
    }
    if (std::holds_alternative<stream::Bye>(m)) return drop_session(rid, "it said bye");
    count_error();
    send_error(rid, stream::ErrorCode::kBadMessage,
               "a sender does not send \"" + std::string(stream::type_name(m)) + "\" messages");
  }

  void count_error() {
    std::lock_guard<std::mutex> lock(mu);
    ++counters.errors;
  }

  void on_hello(const std::string& rid, const stream::Hello& h) {
    int version = 0;
    for (int v : h.versions) {
      const auto& ours = stream::supported_versions();
      if (std::find(ours.begin(), ours.end(), v) != ours.end()) version = std::max(version, v);
    }
    if (version == 0) {
      return send_error(rid, stream::ErrorCode::kUnsupportedVersion,
                        "this receiver speaks protocol version " + std::to_string(stream::kVersion), std::nullopt,
                        stream::supported_versions());
    }
    auto existing = sessions.find(rid);
    if (existing != sessions.end() &&
        (existing->second.worker != h.worker || existing->second.instance != h.instance)) {
      return send_error(rid, stream::ErrorCode::kBadMessage,
                        "this connection already streams as worker " + existing->second.worker);
    }
    if (existing == sessions.end() && !session_of_worker.count(h.worker) && sessions.size() >= config.max_workers) {
      return send_error(rid, stream::ErrorCode::kTooManyWorkers,
                        "this receiver serves at most " + std::to_string(config.max_workers) + " workers");
    }
    uint64_t acked_through = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      std::string known;
      if (!state.claim(h.worker, h.instance, &known)) {
        ++counters.errors;
        log("refused worker " + h.worker + ": its spool instance " + h.instance + " is not " + known);
        return send_error(rid, stream::ErrorCode::kWorkerConflict,
                          "worker id " + h.worker + " belongs to spool instance " + known +
                              " at this receiver, and this sender's spool is " + h.instance +
                              ": two senders share the worker id, or the spool was deleted and its sequence "
                              "numbers restarted. Give this sender a new worker id");
      }
      acked_through = state.acked_through(h.worker);
    }
    if (existing == sessions.end()) {
      // A sender that reconnected leaves its old session behind.
      if (auto w = session_of_worker.find(h.worker); w != session_of_worker.end() && w->second != rid) {
        drop_session(w->second, "it reconnected");
      }
      Session s;
      s.worker = h.worker;
      s.instance = h.instance;
      s.last_recv = Clock::now();
      s.credit = credit;
      sessions.emplace(rid, std::move(s));
      session_of_worker[h.worker] = rid;
      std::lock_guard<std::mutex> lock(mu);
      ++counters.sessions;
      counters.sessions_live = sessions.size();
      log("worker " + h.worker + " connected (" + printable(rid).substr(0, 12) + ", " + std::to_string(h.unacked) +
          " unacknowledged, next seq " + std::to_string(h.next_seq) + ")");
    }
    stream::Welcome w;
    w.version = version;
    w.receiver = receiver_id;
    w.credit = sessions.at(rid).credit;
    w.heartbeat_ms = static_cast<uint32_t>(config.heartbeat_interval.count());
    w.max_message_bytes = config.max_message_bytes;
    w.acked_through = acked_through;
    send_to(rid, stream::encode(w, version));
  }

  void on_traj(const std::string& rid, Session& s, stream::Traj t) {
    enum class Action { kDeliver, kAckNow, kIgnore, kNoCredit };
    Action action = Action::kDeliver;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++counters.received;
      auto& worker_pending = pending[s.worker];
      if (state.acknowledged(s.worker, t.seq)) {
        action = Action::kAckNow;
        ++counters.duplicates;
      } else if (worker_pending.count(t.seq)) {
        // Delivered (or queued) and not acknowledged yet: its ack goes to
        // this session when the trainer gives it.
        action = Action::kIgnore;
        ++counters.duplicates;
      } else if (s.inflight.size() >= s.credit || worker_pending.size() >= s.credit) {
        action = Action::kNoCredit;
      } else {
        worker_pending.emplace(t.seq, false);
        Delivery d;
        d.worker = s.worker;
        d.seq = t.seq;
        d.id = std::move(t.id);
        d.data = std::move(t.data);
        queue.push_back(std::move(d));
        counters.queued = queue.size();
        ready_cv.notify_all();
      }
    }
    switch (action) {
      case Action::kAckNow: {
        stream::Ack a;
        a.ranges = {{t.seq, t.seq}};
        send_to(rid, stream::encode(a));
        break;
      }
      case Action::kNoCredit:
        send_error(rid, stream::ErrorCode::kCreditExceeded,
                   "more than the credit of " + std::to_string(s.credit) + " trajectories in flight; dropped", t.seq);
        break;
      case Action::kIgnore:
      case Action::kDeliver:
        s.inflight.insert(t.seq);
        break;
    }
  }

  // ---- the trainer's side ----------------------------------------------------

  std::vector<Delivery> next_batch(size_t max, milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    const auto deadline = Clock::now() + timeout;
    ready_cv.wait_until(lock, deadline, [&] { return !queue.empty() || stopping; });
    std::vector<Delivery> out;
    while (!queue.empty() && out.size() < max) {
      pending[queue.front().worker][queue.front().seq] = true;
      out.push_back(std::move(queue.front()));
      queue.pop_front();
    }
    delivered_unacked += out.size();
    counters.delivered += out.size();
    counters.queued = queue.size();
    counters.unacked = delivered_unacked;
    return out;
  }

  size_t ack(const std::vector<DeliveryKey>& keys) {
    std::map<std::string, std::vector<uint64_t>> by_worker;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& k : keys) {
        auto p = pending.find(k.worker);
        if (p == pending.end()) continue;
        auto entry = p->second.find(k.seq);
        // Only what the trainer was given can be acknowledged, and only once.
        if (entry == p->second.end() || !entry->second) continue;
        entry->second = false;  // not twice in this call
        by_worker[k.worker].push_back(k.seq);
      }
      if (by_worker.empty()) return 0;
      // Durable first: an ack that reaches a sender is never forgotten here.
      try {
        state.acknowledge(by_worker);
      } catch (...) {
        for (auto& [worker, seqs] : by_worker) {
          for (uint64_t s : seqs) pending[worker][s] = true;
        }
        throw;
      }
      size_t n = 0;
      for (auto& [worker, seqs] : by_worker) {
        auto& p = pending[worker];
        for (uint64_t s : seqs) p.erase(s);
        if (p.empty()) pending.erase(worker);
        n += seqs.size();
        outgoing.emplace_back(worker, seqs);
      }
      counters.acked += n;
      delivered_unacked -= n;
      counters.unacked = delivered_unacked;
      wake();
      return n;
    }
  }

  size_t ack_stored(const std::vector<DeliveryKey>& keys) {
    std::map<std::string, std::vector<uint64_t>> by_worker;
    size_t n = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& k : keys) {
        if (k.seq == 0 || state.acknowledged(k.worker, k.seq)) continue;
        by_worker[k.worker].push_back(k.seq);
      }
      if (by_worker.empty()) return 0;
      state.acknowledge(by_worker);
      for (auto& [worker, seqs] : by_worker) {
        // Queued or handed out again in this run: the trainer has it already.
        if (auto p = pending.find(worker); p != pending.end()) {
          for (uint64_t s : seqs) {
            auto e = p->second.find(s);
            if (e == p->second.end()) continue;
            if (e->second) --delivered_unacked;
            p->second.erase(e);
          }
          if (p->second.empty()) pending.erase(p);
        }
        const std::set<uint64_t> stored(seqs.begin(), seqs.end());
        const std::string& w = worker;  // C++17 lambdas cannot capture a structured binding
        queue.erase(std::remove_if(queue.begin(), queue.end(),
                                   [&](const Delivery& d) { return d.worker == w && stored.count(d.seq); }),
                    queue.end());
        n += seqs.size();
        outgoing.emplace_back(worker, seqs);
      }
      counters.acked += n;
      counters.queued = queue.size();
      counters.unacked = delivered_unacked;
    }
    wake();
    return n;
  }
};

TrajectoryReceiver::TrajectoryReceiver(ReceiverConfig config) {
  if (config.credit < 1 || config.credit > 1000000) {
    throw InputError("trajectory receiver: credit must be 1..1000000, got " + std::to_string(config.credit));
  }
  if (config.max_message_bytes < 1024) throw InputError("trajectory receiver: max_message_bytes must be >= 1024");
  if (config.max_workers < 1) throw InputError("trajectory receiver: max_workers must be at least 1");
  if (config.heartbeat_interval < milliseconds(10) || config.heartbeat_timeout < 2 * config.heartbeat_interval) {
    throw InputError(
        "trajectory receiver: heartbeat_interval must be >= 10 ms and heartbeat_timeout at least twice it");
  }
  impl_ = std::make_unique<Impl>(std::move(config));
}

TrajectoryReceiver::~TrajectoryReceiver() = default;

const std::string& TrajectoryReceiver::endpoint() const { return impl_->endpoint; }

std::optional<Delivery> TrajectoryReceiver::next(std::chrono::milliseconds timeout) {
  auto batch = impl_->next_batch(1, timeout);
  if (batch.empty()) return std::nullopt;
  return std::move(batch.front());
}

std::vector<Delivery> TrajectoryReceiver::next_batch(size_t max, std::chrono::milliseconds timeout) {
  return impl_->next_batch(max, timeout);
}

size_t TrajectoryReceiver::ack(const std::vector<DeliveryKey>& keys) { return impl_->ack(keys); }

size_t TrajectoryReceiver::ack_stored(const std::vector<DeliveryKey>& keys) { return impl_->ack_stored(keys); }

void TrajectoryReceiver::set_credit(uint64_t credit) {
  if (credit < 1) throw InputError("trajectory receiver: credit must be at least 1");
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->new_credit = credit;
  }
  impl_->wake();
}

ReceiverStats TrajectoryReceiver::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->counters;
}

}  // namespace kforge::rollout
