// The I/O thread of a TrajectorySender: the session with the receiver
// (hello, welcome, credit, heartbeats, reconnects) and the sending of what
// the outbox holds. Only this thread touches the socket.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <zmq.hpp>

#include "curve_socket.h"
#include "kforge/core/elapsed.h"
#include "kforge/rollout/stream/stream_protocol.h"
#include "trajectory_sender_impl.h"

#ifndef KFORGE_VERSION
#define KFORGE_VERSION "0.0.0"
#endif

namespace kforge::rollout {
namespace {

// Trajectories taken from the outbox per pass, so that incoming acks and
// heartbeats are read between passes.
constexpr size_t kSendBatch = 256;

}  // namespace

void TrajectorySender::Impl::open_socket() {
  auto s = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
  s->set(zmq::sockopt::linger, 0);
  // Credit bounds what is queued; ZeroMQ's own limit would only drop.
  s->set(zmq::sockopt::sndhwm, 0);
  s->set(zmq::sockopt::rcvhwm, 0);
  // Receivers send small messages only.
  s->set(zmq::sockopt::maxmsgsize, int64_t{1} << 20);
  internal::apply_curve_client(*s, config.curve);
  try {
    s->connect(config.endpoint);
  } catch (const zmq::error_t& e) {
    throw InputError("trajectory sender: cannot connect to \"" + config.endpoint + "\": " + e.what() +
                     " (expected e.g. tcp://127.0.0.1:5557)");
  }
  socket = std::move(s);
}

bool TrajectorySender::Impl::send_frame(const std::string& frame) {
  try {
    const auto r = socket->send(zmq::buffer(frame), zmq::send_flags::dontwait);
    if (r) last_send = Clock::now();
    return r.has_value();
  } catch (const zmq::error_t& e) {
    log(std::string("send failed: ") + e.what());
    return false;
  }
}

// A traj frame built in the message itself: the payload is copied once.
bool TrajectorySender::Impl::send_traj(uint64_t seq, const std::string& id, const std::string& payload) {
  const std::string header = stream::encode_traj_header(seq, id, payload.size(), version);
  zmq::message_t msg(header.size() + payload.size());
  std::memcpy(msg.data(), header.data(), header.size());
  std::memcpy(static_cast<char*>(msg.data()) + header.size(), payload.data(), payload.size());
  try {
    const auto r = socket->send(msg, zmq::send_flags::dontwait);
    if (r) last_send = Clock::now();
    return r.has_value();
  } catch (const zmq::error_t& e) {
    log(std::string("send failed: ") + e.what());
    return false;
  }
}

void TrajectorySender::Impl::send_hello() {
  stream::Hello h;
  h.worker = config.worker_id;
  {
    std::lock_guard<std::mutex> lock(mu);
    h.instance = spool.instance();
    h.next_seq = spool.next_seq();
    h.unacked = outbox.size();
  }
  h.heartbeat_ms = static_cast<uint32_t>(config.heartbeat_interval.count());
  h.software = std::string("kforge ") + KFORGE_VERSION;
  send_frame(stream::encode(h));
}

void TrajectorySender::Impl::disconnect(const std::string& why, bool immediate) {
  if (state == State::kConnected) log("reconnecting: " + why);
  socket.reset();
  state = State::kDisconnected;
  retry_at = Clock::now() + (immediate ? milliseconds(0) : backoff);
  if (!immediate) backoff = std::min(backoff * 2, config.max_reconnect_delay);
  std::lock_guard<std::mutex> lock(mu);
  counters.connected = false;
  counters.inflight = 0;
}

void TrajectorySender::Impl::run() {
  while (!stopping) {
    try {
      step();
    } catch (const std::exception& e) {
      // A failure of one pass (a disk error reading the spool) must not
      // end the thread: log it, drop the session and start over.
      log(std::string("error: ") + e.what());
      disconnect(e.what(), false);
    }
  }
  if (socket && state == State::kConnected) send_frame(stream::encode(stream::Bye{}, version));
  socket.reset();
}

void TrajectorySender::Impl::step() {
  const auto now = Clock::now();
  if (state == State::kDisconnected && now >= retry_at) {
    open_socket();
    state = State::kHelloSent;
    hello_deadline = now + config.heartbeat_timeout;
    send_hello();
  }
  if (state == State::kHelloSent) {
    if (now >= hello_deadline) {
      if (++failed_attempts == 1 || failed_attempts % 10 == 0) {
        log("no welcome from " + config.endpoint + " (" + std::to_string(failed_attempts) +
            " attempts); trajectories stay in the spool, retrying");
      }
      disconnect("no welcome", false);
    } else if (now - last_send >= config.heartbeat_interval) {
      // The first hello may have gone to a receiver that died since.
      send_hello();
    }
  }
  if (state == State::kConnected) {
    if (now - last_recv > config.heartbeat_timeout) {
      disconnect("nothing heard from the receiver for " + std::to_string(config.heartbeat_timeout.count()) + " ms",
                 true);
    } else {
      send_pending();
      if (Clock::now() - last_send >= config.heartbeat_interval) {
        send_frame(stream::encode(stream::Heartbeat{}, version));
      }
    }
  }
  poll_once();
}

void TrajectorySender::Impl::poll_once() {
  zmq::pollitem_t items[2] = {{nullptr, wake_fd.get(), ZMQ_POLLIN, 0}, {nullptr, 0, ZMQ_POLLIN, 0}};
  size_t n = 1;
  if (socket) {
    items[1].socket = socket->handle();
    n = 2;
  }
  milliseconds timeout = config.heartbeat_interval / 2;
  if (state == State::kDisconnected) {
    timeout = std::min(timeout, std::chrono::duration_cast<milliseconds>(retry_at - Clock::now()));
  }
  timeout = std::clamp(timeout, milliseconds(1), milliseconds(100));
  zmq::poll(items, n, timeout);
  if (items[0].revents & ZMQ_POLLIN) {
    uint64_t count;
    (void)!::read(wake_fd.get(), &count, sizeof count);
  }
  // Cleared before the next pass looks at the outbox: a write after this
  // point wakes the thread again, one before it is seen by the pass.
  wake_pending = false;
  if (n == 2 && (items[1].revents & ZMQ_POLLIN)) {
    // Everything that is waiting, so that acks are never starved by sends.
    for (int i = 0; i < 4096 && socket; ++i) {
      zmq::message_t msg;
      if (!socket->recv(msg, zmq::recv_flags::dontwait)) break;
      handle(msg.to_string_view());
    }
  }
}

void TrajectorySender::Impl::handle(std::string_view frame) {
  stream::Message m;
  try {
    m = stream::decode(frame);
  } catch (const stream::DecodeError& e) {
    log(std::string("ignored a malformed message from the receiver: ") + e.what());
    return;
  }
  last_recv = Clock::now();
  if (const auto* w = std::get_if<stream::Welcome>(&m)) {
    on_welcome(*w);
  } else if (const auto* a = std::get_if<stream::Ack>(&m)) {
    on_ack(a->ranges);
  } else if (const auto* c = std::get_if<stream::Credit>(&m)) {
    credit = c->credit;
    std::lock_guard<std::mutex> lock(mu);
    counters.credit = credit;
  } else if (const auto* e = std::get_if<stream::Error>(&m)) {
    on_error(*e);
  }
  // Heartbeats only count as liveness; a sender's own messages coming
  // back would be a misrouted peer: ignored.
}

void TrajectorySender::Impl::on_welcome(const stream::Welcome& w) {
  if (state != State::kHelloSent) return;  // an answer to a repeated hello
  if (w.acked_through > 0) on_ack({{1, w.acked_through}});
  state = State::kConnected;
  version = w.version;
  credit = w.credit;
  inflight = 0;
  receiver_max_message = w.max_message_bytes;
  backoff = milliseconds(100);
  failed_attempts = 0;
  size_t waiting;
  {
    std::lock_guard<std::mutex> lock(mu);
    next_to_send = outbox.empty() ? spool.next_seq() : outbox.begin()->first;
    waiting = outbox.size();
    counters.connected = true;
    counters.credit = credit;
    counters.inflight = 0;
    if (ever_connected) ++counters.reconnects;
  }
  log(std::string(ever_connected ? "reconnected" : "connected") + " to " + config.endpoint + " (receiver " +
      w.receiver + ", credit " + std::to_string(w.credit) + ", " + std::to_string(waiting) + " unacknowledged)");
  ever_connected = true;
}

void TrajectorySender::Impl::on_ack(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  std::vector<uint64_t> seqs;
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [first, last] : ranges) {
    for (auto it = outbox.lower_bound(first); it != outbox.end() && it->first <= last;) {
      if (it->second.payload) outbox_bytes -= it->second.payload->size();
      delivery_latency.add(elapsed_ms(it->second.written, now));
      if (it->second.sent != Clock::time_point{}) {
        ack_latency.add(elapsed_ms(it->second.sent, now));
      }
      if (it->first < next_to_send && inflight > 0) --inflight;
      seqs.push_back(it->first);
      it = outbox.erase(it);
    }
  }
  if (seqs.empty()) return;
  try {
    spool.acknowledge(seqs);
  } catch (const std::exception& e) {
    // The receiver holds them; if the ack cannot be recorded they are sent
    // again after a restart and acknowledged as duplicates.
    log(std::string("cannot record acks in the spool: ") + e.what());
  }
  counters.acked += seqs.size();
  counters.unacked = outbox.size();
  counters.inflight = inflight;
  space_cv.notify_all();
  acked_cv.notify_all();
}

void TrajectorySender::Impl::on_error(const stream::Error& e) {
  const std::string what = e.code + ": " + e.message;
  const auto code = stream::error_code_from_name(e.code);
  if (code == stream::ErrorCode::kRejected && e.seq) {
    std::lock_guard<std::mutex> lock(mu);
    set_aside_locked(*e.seq, "the receiver rejected it: " + e.message);
    return;
  }
  if (code == stream::ErrorCode::kNoSession) {
    // The receiver restarted or dropped this session: start a new one now.
    if (state != State::kHelloSent) disconnect("the receiver has no session for this connection", true);
    return;
  }
  log("receiver error " + what);
  if (code == stream::ErrorCode::kUnsupportedVersion || code == stream::ErrorCode::kWorkerConflict) {
    // Nothing changes by retrying at once; an operator must act.
    backoff = config.max_reconnect_delay;
  }
  disconnect(what, false);
}

void TrajectorySender::Impl::set_aside_locked(uint64_t seq, const std::string& reason) {
  auto it = outbox.find(seq);
  if (it == outbox.end()) return;
  if (it->second.payload) outbox_bytes -= it->second.payload->size();
  if (seq < next_to_send && inflight > 0) --inflight;
  outbox.erase(it);
  try {
    spool.set_aside(seq, reason);
  } catch (const std::exception& e) {
    log("cannot set seq " + std::to_string(seq) + " aside: " + e.what());
    return;
  }
  ++counters.rejected;
  counters.unacked = outbox.size();
  log("seq " + std::to_string(seq) + " set aside in " + (config.spool_dir / "rejected.jsonl").string() + ": " + reason);
  space_cv.notify_all();
  acked_cv.notify_all();
}

void TrajectorySender::Impl::send_pending() {
  while (state == State::kConnected && inflight < credit && !stopping) {
    std::vector<ToSend> batch;
    {
      std::lock_guard<std::mutex> lock(mu);
      const uint64_t limit = receiver_max_message ? receiver_max_message : config.max_message_bytes;
      for (auto it = outbox.lower_bound(next_to_send);
           it != outbox.end() && inflight < credit && batch.size() < kSendBatch;) {
        const uint64_t seq = it->first;
        const SpoolRecord& rec = spool.pending().at(seq);
        ++it;
        if (rec.size + stream::traj_overhead(rec.id.size()) > limit) {
          set_aside_locked(seq, "its " + std::to_string(rec.size) + " bytes exceed the receiver's limit of " +
                                    std::to_string(limit) + " bytes per message");
          continue;
        }
        Out& out = outbox.at(seq);
        out.sent = Clock::now();
        auto payload = out.payload;
        if (!payload) payload = std::make_shared<const std::string>(spool.read(seq));
        batch.push_back({seq, rec.id, std::move(payload)});
        next_to_send = seq + 1;
        ++inflight;
      }
      counters.inflight = inflight;
    }
    if (batch.empty()) return;
    uint64_t sent = 0, resent = 0;
    for (const ToSend& t : batch) {
      if (!send_traj(t.seq, t.id, *t.payload)) {
        disconnect("the connection refused a message", false);
        break;
      }
      ++sent;
      if (t.seq <= max_sent_seq) ++resent;
      max_sent_seq = std::max(max_sent_seq, t.seq);
    }
    std::lock_guard<std::mutex> lock(mu);
    counters.sent += sent;
    counters.resent += resent;
  }
}

}  // namespace kforge::rollout
