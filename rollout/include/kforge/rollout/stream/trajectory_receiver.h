// The trainer's end of the trajectory stream in C++ (the Python one is
// kforge.TrajectoryStream; both follow trainer_bridge/STREAM.md): binds a
// ZeroMQ ROUTER, admits senders (hello/welcome), grants them credit, hands
// each trajectory to the trainer once, and acknowledges it to its sender only
// when the trainer calls ack(): the trainer holds it then.
//
// Delivery is exactly once per (worker id, seq) among what the trainer
// acknowledges: a duplicate of an acknowledged trajectory (a resend after a
// reconnect, a restarted worker) is acknowledged again without being
// delivered; one that is delivered but not yet acknowledged is not delivered
// twice. With a state directory (ReceiverState) this holds across restarts
// of the receiver too. What the trainer never acknowledges stays in the
// senders' spools and is delivered again by the next receiver.
//
// A background thread owns the socket, so heartbeats keep flowing while the
// trainer is busy; next()/next_batch()/ack() may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/rollout/stream/curve.h"

namespace kforge::rollout {

struct ReceiverConfig {
  // Port 0 or * picks a free port (see endpoint()). Another address than
  // loopback without CurveZMQ logs a warning.
  std::string bind = "tcp://127.0.0.1:5557";
  // Where the acknowledged set lives (ReceiverState); empty: in memory, so a
  // restarted receiver may deliver again what the trainer acknowledged.
  std::filesystem::path state_dir;
  bool fsync = false;
  // Trajectories each sender may have in flight (sent, not acknowledged).
  // Memory is bounded by credit x max_workers x max_message_bytes.
  uint64_t credit = 128;
  uint64_t max_message_bytes = uint64_t{64} << 20;
  size_t max_workers = 4096;
  std::chrono::milliseconds heartbeat_interval{1000};
  // A sender silent this long loses its session (it reconnects when alive).
  std::chrono::milliseconds heartbeat_timeout{10000};
  CurveServerOptions curve;
  std::function<void(const std::string&)> log;
};

struct DeliveryKey {
  std::string worker;
  uint64_t seq = 0;
  bool operator<(const DeliveryKey& o) const { return worker < o.worker || (worker == o.worker && seq < o.seq); }
  bool operator==(const DeliveryKey& o) const { return worker == o.worker && seq == o.seq; }
};

struct Delivery {
  std::string worker;
  uint64_t seq = 0;
  std::string id;
  std::string data;  // the trajectory, MessagePack (a map)
  DeliveryKey key() const { return {worker, seq}; }
  // `data` decoded (bounded depth); invalid UTF-8 in strings is kept as is.
  json trajectory() const;
};

struct ReceiverStats {
  uint64_t received = 0;    // traj messages, duplicates included
  uint64_t delivered = 0;   // handed to the trainer
  uint64_t acked = 0;       // acknowledged by the trainer
  uint64_t duplicates = 0;  // received again while delivered or after acked
  uint64_t rejected = 0;    // malformed trajectories refused
  uint64_t errors = 0;      // malformed or unexpected messages
  uint64_t sessions = 0;    // hellos welcomed
  uint64_t sessions_live = 0;
  uint64_t queued = 0;   // received, waiting for next()
  uint64_t unacked = 0;  // delivered, waiting for ack()
};

class TrajectoryReceiver {
 public:
  // Binds and starts serving. InputError for a bad configuration or an
  // endpoint that cannot be bound; SystemError for a damaged state dir.
  explicit TrajectoryReceiver(ReceiverConfig config);
  // Stops serving; what was delivered but not acknowledged is sent again by
  // the senders to the next receiver.
  ~TrajectoryReceiver();
  TrajectoryReceiver(const TrajectoryReceiver&) = delete;
  TrajectoryReceiver& operator=(const TrajectoryReceiver&) = delete;

  // The bound endpoint, with the port chosen.
  const std::string& endpoint() const;
  // The next trajectory, or nothing after `timeout`.
  std::optional<Delivery> next(std::chrono::milliseconds timeout);
  // Up to `max` trajectories: waits up to `timeout` for the first, then
  // takes what has arrived (none after a timeout with nothing). Waiting for
  // a full batch is the caller's choice: with credit C and W senders, at
  // most C x W can be waiting unacknowledged.
  std::vector<Delivery> next_batch(size_t max, std::chrono::milliseconds timeout);
  // The trainer holds these: recorded in the state (durably, before this
  // returns), then acknowledged to their senders. Keys not delivered (or
  // already acknowledged) are ignored; returns how many were acknowledged.
  size_t ack(const std::vector<DeliveryKey>& keys);
  // Keys of trajectories the trainer stored in an earlier run without
  // acknowledging them (it died in between): recorded as acknowledged now,
  // so that when their senders resend them they are acknowledged instead of
  // delivered. A trainer that stores trajectories itself notes the keys of a
  // batch before storing it, and after a crash passes those it finds stored
  // (kforge receive does; trainer_bridge/STREAM.md). Returns how many were
  // not acknowledged before.
  size_t ack_stored(const std::vector<DeliveryKey>& keys);
  // Changes the credit of every session (a `credit` message to each).
  void set_credit(uint64_t credit);
  ReceiverStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kforge::rollout
