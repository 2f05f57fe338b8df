#include "kforge/rollout/stream/trajectory_sender.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "curve_socket.h"
#include "kforge/core/endpoint.h"
#include "kforge/core/msgpack.h"
#include "kforge/core/trajectory.h"
#include "kforge/rollout/stream/stream_protocol.h"
#include "kforge/rollout/stream/trajectory_spool.h"

#ifndef KFORGE_VERSION
#define KFORGE_VERSION "0.0.0"
#endif

namespace kforge::rollout {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kLatencySamples = 65536;
// Trajectories taken from the outbox per pass, so that incoming acks and
// heartbeats are read between passes.
constexpr size_t kSendBatch = 256;

enum class State { kDisconnected, kHelloSent, kConnected };

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// The last kLatencySamples latencies, in milliseconds.
class LatencyRing {
 public:
  void add(double ms) {
    if (samples_.size() < kLatencySamples) {
      samples_.push_back(ms);
    } else {
      samples_[next_] = ms;
    }
    next_ = (next_ + 1) % kLatencySamples;
  }
  double quantile(double q) const { return percentile(samples_, q); }
  double max() const { return samples_.empty() ? 0.0 : *std::max_element(samples_.begin(), samples_.end()); }

 private:
  std::vector<double> samples_;
  size_t next_ = 0;
};

}  // namespace

struct TrajectorySender::Impl {
  struct Out {
    std::shared_ptr<const std::string> payload;  // null: read back from the spool
    Clock::time_point written;
    Clock::time_point sent;  // last sent (resends included)
  };
  struct ToSend {
    uint64_t seq;
    std::string id;
    std::shared_ptr<const std::string> payload;
  };

  SenderConfig config;
  std::function<void(const std::string&)> log;

  mutable std::mutex mu;
  std::condition_variable space_cv;  // write() waits here for room in the spool
  std::condition_variable acked_cv;  // flush() waits here
  TrajectorySpool spool;
  std::map<uint64_t, Out> outbox;  // everything unacknowledged, by seq
  uint64_t outbox_bytes = 0;
  SenderStats counters;
  LatencyRing ack_latency;       // sent -> acked
  LatencyRing delivery_latency;  // written -> acked

  zmq::context_t ctx{1};
  std::unique_ptr<zmq::socket_t> socket;
  int wake_fd = -1;
  mutable std::atomic<bool> wake_pending{false};
  std::atomic<bool> stopping{false};
  std::thread io;

  // Session state: the I/O thread's alone.
  State state = State::kDisconnected;
  uint64_t credit = 0;
  uint64_t inflight = 0;
  uint64_t next_to_send = 1;  // outbox entries below this were sent in this session
  uint64_t max_sent_seq = 0;  // across sessions, to count resends
  uint64_t receiver_max_message = 0;
  int version = stream::kVersion;
  bool ever_connected = false;
  Clock::time_point last_recv, last_send, hello_deadline, retry_at;
  milliseconds backoff{100};
  int failed_attempts = 0;

  explicit Impl(SenderConfig c)
      : config(std::move(c)),
        log(config.log ? config.log
                       : std::function<void(const std::string&)>([w = config.worker_id](const std::string& m) {
                           std::fprintf(stderr, "kforge stream sender [%s]: %s\n", w.c_str(), m.c_str());
                         })),
        spool(SpoolOptions{config.spool_dir, config.worker_id, config.max_spool_bytes, 0, config.fsync}) {
    for (const auto& [seq, rec] : spool.pending()) outbox.emplace(seq, Out{nullptr, Clock::now(), {}});
    counters.unacked = outbox.size();
    wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd < 0) throw SystemError("trajectory sender: eventfd failed");
    if (!outbox.empty()) {
      log(std::to_string(outbox.size()) + " trajectories from an earlier run are waiting in " +
          config.spool_dir.string() + "; they will be sent again");
    }
    if (!is_local_endpoint(config.endpoint) && !config.curve.enabled()) {
      log("warning: " + config.endpoint +
          " is not on this host and CurveZMQ is off: trajectories travel in clear text and anyone who can reach "
          "the receiver can inject them (set the receiver's public key, see trainer_bridge/STREAM.md)");
    }
    // The first socket is made here so that a malformed endpoint is the
    // caller's error, not a log line.
    open_socket();
    state = State::kHelloSent;
    hello_deadline = Clock::now() + config.heartbeat_timeout;
    send_hello();
    io = std::thread([this] { run(); });
  }

  ~Impl() {
    stopping = true;
    space_cv.notify_all();
    wake();
    if (io.joinable()) io.join();
    if (wake_fd >= 0) ::close(wake_fd);
  }

  // One wake-up per pass of the I/O thread, not one per write(): under load
  // the thread is awake anyway and takes every new trajectory in its pass.
  void wake() const {
    if (wake_pending.exchange(true)) return;
    const uint64_t one = 1;
    (void)!::write(wake_fd, &one, sizeof one);
  }

  // ---- sockets --------------------------------------------------------

  void open_socket() {
    auto s = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
    s->set(zmq::sockopt::linger, 0);
    // Credit bounds what is queued; ZeroMQ's own limit would only drop.
    s->set(zmq::sockopt::sndhwm, 0);
    s->set(zmq::sockopt::rcvhwm, 0);
    // Receivers send small messages only.
    s->set(zmq::sockopt::maxmsgsize, int64_t{1} << 20);
    detail::apply_curve_client(*s, config.curve);
    try {
      s->connect(config.endpoint);
    } catch (const zmq::error_t& e) {
      throw InputError("trajectory sender: cannot connect to \"" + config.endpoint + "\": " + e.what() +
                       " (expected e.g. tcp://127.0.0.1:5557)");
    }
    socket = std::move(s);
  }

  bool send_frame(const std::string& frame) {
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
  bool send_traj(uint64_t seq, const std::string& id, const std::string& payload) {
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

  void send_hello() {
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

  void disconnect(const std::string& why, bool immediate) {
    if (state == State::kConnected) log("reconnecting: " + why);
    socket.reset();
    state = State::kDisconnected;
    retry_at = Clock::now() + (immediate ? milliseconds(0) : backoff);
    if (!immediate) backoff = std::min(backoff * 2, config.max_reconnect_delay);
    std::lock_guard<std::mutex> lock(mu);
    counters.connected = false;
    counters.inflight = 0;
  }

  // ---- the I/O thread --------------------------------------------------

  void run() {
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

  void step() {
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

  void poll_once() {
    zmq::pollitem_t items[2] = {{nullptr, wake_fd, ZMQ_POLLIN, 0}, {nullptr, 0, ZMQ_POLLIN, 0}};
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
      (void)!::read(wake_fd, &count, sizeof count);
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

  void handle(std::string_view frame) {
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

  void on_welcome(const stream::Welcome& w) {
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

  void on_ack(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
    std::vector<uint64_t> seqs;
    const auto now = Clock::now();
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [first, last] : ranges) {
      for (auto it = outbox.lower_bound(first); it != outbox.end() && it->first <= last;) {
        if (it->second.payload) outbox_bytes -= it->second.payload->size();
        delivery_latency.add(std::chrono::duration<double, std::milli>(now - it->second.written).count());
        if (it->second.sent != Clock::time_point{}) {
          ack_latency.add(std::chrono::duration<double, std::milli>(now - it->second.sent).count());
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

  void on_error(const stream::Error& e) {
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

  void set_aside_locked(uint64_t seq, const std::string& reason) {
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
    log("seq " + std::to_string(seq) + " set aside in " + (config.spool_dir / "rejected.jsonl").string() + ": " +
        reason);
    space_cv.notify_all();
    acked_cv.notify_all();
  }

  void send_pending() {
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

  // ---- the writers' side ------------------------------------------------

  // `owned`, when given, holds `payload` and may be moved into the outbox.
  uint64_t write_encoded(std::string_view id, std::string_view payload, std::string* owned = nullptr) {
    if (id.empty() || id.size() > stream::kMaxTrajectoryIdBytes || !msgpack::valid_utf8(id)) {
      throw InputError("trajectory stream: a trajectory's \"id\" must be 1.." +
                       std::to_string(stream::kMaxTrajectoryIdBytes) + " bytes of UTF-8");
    }
    if (payload.empty() || !((payload[0] & 0xf0) == 0x80 || static_cast<unsigned char>(payload[0]) == 0xde ||
                             static_cast<unsigned char>(payload[0]) == 0xdf)) {
      throw InputError("trajectory stream: trajectory \"" + std::string(id) + "\" is not a MessagePack map");
    }
    if (std::string why = msgpack::check(payload, stream::kMaxDataDepth); !why.empty()) {
      throw InputError("trajectory stream: trajectory \"" + std::string(id) +
                       "\" is not well-formed MessagePack: " + why);
    }
    const uint64_t frame = payload.size() + stream::traj_overhead(id.size());
    if (frame > config.max_message_bytes) {
      throw InputError("trajectory stream: trajectory \"" + std::string(id) + "\" is " + std::to_string(frame) +
                       " bytes encoded, above max_message_bytes (" + std::to_string(config.max_message_bytes) +
                       "); raise it on both ends or record less per turn");
    }
    if (TrajectorySpool::record_bytes(id.size(), payload.size()) > config.max_spool_bytes / 2) {
      throw InputError("trajectory stream: trajectory \"" + std::string(id) + "\" (" + std::to_string(payload.size()) +
                       " bytes) cannot fit a spool of max_spool_bytes " + std::to_string(config.max_spool_bytes) +
                       "; raise it");
    }
    std::unique_lock<std::mutex> lock(mu);
    if (!spool.fits(id.size(), payload.size())) {
      const bool room = space_cv.wait_for(lock, config.write_timeout,
                                          [&] { return stopping.load() || spool.fits(id.size(), payload.size()); });
      if (!room || stopping) {
        throw SystemError("trajectory stream: the spool " + config.spool_dir.string() + " is full (" +
                          std::to_string(spool.disk_bytes()) + " of " + std::to_string(config.max_spool_bytes) +
                          " bytes) and nothing was acknowledged by " + config.endpoint + " for " +
                          std::to_string(config.write_timeout.count()) +
                          " ms; check that the trainer's receiver runs and acknowledges, or raise max_spool_bytes");
      }
    }
    const uint64_t seq = spool.append(id, payload);
    Out out{nullptr, Clock::now(), {}};
    if (outbox_bytes + payload.size() <= config.max_outbox_bytes) {
      out.payload =
          owned ? std::make_shared<const std::string>(std::move(*owned)) : std::make_shared<const std::string>(payload);
      outbox_bytes += payload.size();
    }
    outbox.emplace(seq, std::move(out));
    ++counters.written;
    counters.unacked = outbox.size();
    lock.unlock();
    wake();
    return seq;
  }

  bool flush(milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return acked_cv.wait_for(lock, timeout, [&] { return outbox.empty(); });
  }

  SenderStats stats() const {
    std::lock_guard<std::mutex> lock(mu);
    SenderStats s = counters;
    s.spool_bytes = spool.disk_bytes();
    s.next_seq = spool.next_seq();
    s.rejected = spool.rejected_count();
    s.ack_latency_p50_ms = ack_latency.quantile(0.50);
    s.ack_latency_p99_ms = ack_latency.quantile(0.99);
    s.ack_latency_max_ms = ack_latency.max();
    s.delivery_latency_p50_ms = delivery_latency.quantile(0.50);
    s.delivery_latency_p99_ms = delivery_latency.quantile(0.99);
    return s;
  }
};

namespace {

SenderConfig checked(SenderConfig c) {
  if (std::string why = stream::check_worker_id(c.worker_id); !why.empty()) {
    throw InputError("trajectory sender: worker_id \"" + c.worker_id + "\": " + why);
  }
  if (c.endpoint.empty()) throw InputError("trajectory sender: endpoint is empty (e.g. tcp://127.0.0.1:5557)");
  if (c.spool_dir.empty()) throw InputError("trajectory sender: spool_dir is empty; give each worker its own");
  if (c.heartbeat_interval < milliseconds(10) || c.heartbeat_interval > std::chrono::hours(1)) {
    throw InputError("trajectory sender: heartbeat_interval must be 10 ms .. 1 h, got " +
                     std::to_string(c.heartbeat_interval.count()) + " ms");
  }
  if (c.heartbeat_timeout < 2 * c.heartbeat_interval) {
    throw InputError("trajectory sender: heartbeat_timeout (" + std::to_string(c.heartbeat_timeout.count()) +
                     " ms) must be at least twice heartbeat_interval (" + std::to_string(c.heartbeat_interval.count()) +
                     " ms)");
  }
  if (c.max_message_bytes < 1024) throw InputError("trajectory sender: max_message_bytes must be at least 1024");
  if (c.max_reconnect_delay < milliseconds(100)) {
    throw InputError("trajectory sender: max_reconnect_delay must be at least 100 ms");
  }
  if (c.write_timeout < milliseconds(0)) throw InputError("trajectory sender: write_timeout must not be negative");
  if (c.curve.enabled() && !is_z85_key(c.curve.server_public_key)) {
    throw InputError("trajectory sender: curve.server_public_key must be 40 characters of Z85 text");
  }
  return c;
}

}  // namespace

TrajectorySender::TrajectorySender(SenderConfig config) : impl_(std::make_unique<Impl>(checked(std::move(config)))) {}

TrajectorySender::~TrajectorySender() = default;

void TrajectorySender::write(const Trajectory& trajectory) { write_value(to_json(trajectory)); }

void TrajectorySender::write_value(const json& trajectory) {
  if (!trajectory.is_object()) throw InputError("trajectory stream: a trajectory must be a JSON object");
  const auto it = trajectory.find("id");
  if (it == trajectory.end() || !it->is_string()) {
    throw InputError("trajectory stream: the trajectory has no string \"id\"; every trajectory needs a unique id");
  }
  std::string payload = msgpack::encode(trajectory);
  impl_->write_encoded(it->get_ref<const std::string&>(), payload, &payload);
}

uint64_t TrajectorySender::write_encoded(std::string_view id, std::string_view msgpack_map) {
  return impl_->write_encoded(id, msgpack_map);
}

bool TrajectorySender::flush(std::chrono::milliseconds timeout) { return impl_->flush(timeout); }

SenderStats TrajectorySender::stats() const { return impl_->stats(); }

const std::string& TrajectorySender::worker_id() const { return impl_->config.worker_id; }

const std::string& TrajectorySender::instance() const { return impl_->spool.instance(); }

}  // namespace kforge::rollout
