// TrajectorySender's state, shared by the writers' side
// (trajectory_sender.cpp) and the I/O thread that owns the session with the
// receiver (trajectory_sender_session.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "kforge/core/unique_fd.h"
#include "kforge/rollout/stream/stream_protocol.h"
#include "kforge/rollout/stream/trajectory_sender.h"
#include "kforge/rollout/stream/trajectory_spool.h"
#include "latency_ring.h"

namespace kforge::rollout {

struct TrajectorySender::Impl {
  using Clock = std::chrono::steady_clock;
  using milliseconds = std::chrono::milliseconds;

  enum class State { kDisconnected, kHelloSent, kConnected };

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
  internal::LatencyRing ack_latency;       // sent -> acked
  internal::LatencyRing delivery_latency;  // written -> acked

  zmq::context_t ctx{1};
  std::unique_ptr<zmq::socket_t> socket;
  UniqueFd wake_fd;
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

  explicit Impl(SenderConfig c);
  ~Impl();

  void wake() const;

  // ---- sockets (trajectory_sender_session.cpp) ---------------------------

  void open_socket();
  bool send_frame(const std::string& frame);
  bool send_traj(uint64_t seq, const std::string& id, const std::string& payload);
  void send_hello();
  void disconnect(const std::string& why, bool immediate);

  // ---- the I/O thread (trajectory_sender_session.cpp) --------------------

  void run();
  void step();
  void poll_once();
  void handle(std::string_view frame);
  void on_welcome(const stream::Welcome& w);
  void on_ack(const std::vector<std::pair<uint64_t, uint64_t>>& ranges);
  void on_error(const stream::Error& e);
  void set_aside_locked(uint64_t seq, const std::string& reason);
  void send_pending();

  // ---- the writers' side (trajectory_sender.cpp) -------------------------

  // `owned`, when given, holds `payload` and may be moved into the outbox.
  uint64_t write_encoded(std::string_view id, std::string_view payload, std::string* owned = nullptr);
  bool flush(milliseconds timeout);
  SenderStats stats() const;
};

}  // namespace kforge::rollout
