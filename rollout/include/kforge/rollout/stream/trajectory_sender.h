// The rollout worker's end of the trajectory stream (docs/architecture.md#rollouts,
// trainer_bridge/STREAM.md): a TrajectorySink that delivers every trajectory
// to the trainer's receiver exactly once, whatever is killed when.
//
// write() spools the trajectory to disk (TrajectorySpool) and returns; a
// background thread owns a ZeroMQ DEALER socket connected to the receiver's
// ROUTER, says hello, sends what is unacknowledged as far as the receiver's
// credit allows, and drops each trajectory from the spool when its ack comes.
// Heartbeats go both ways; silence past the timeout, a receiver that
// restarted (no_session) or a broken connection make it reconnect and send
// again everything unacknowledged. The receiver deduplicates by (worker id,
// seq), so resending is always safe. A worker killed and restarted on the
// same spool directory resends what was not acknowledged.
//
// Back-pressure: the receiver's credit bounds what is in flight; when the
// spool reaches its size limit, write() blocks, and throws SystemError after
// write_timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "kforge/core/document.h"
#include "kforge/core/trajectory_sink.h"
#include "kforge/rollout/stream/curve.h"

namespace kforge::rollout {

struct SenderConfig {
  // The receiver's endpoint. Another host needs CurveZMQ (`curve`), else a
  // warning is logged: anyone on the path can read and inject trajectories.
  std::string endpoint = "tcp://127.0.0.1:5557";
  // Names this worker's sequence space; must stay the same across restarts
  // of the worker and be unique among the receiver's workers.
  std::string worker_id;
  std::filesystem::path spool_dir;
  uint64_t max_spool_bytes = uint64_t{1} << 30;
  // Payloads also kept in memory so that sending never reads the disk; past
  // this, they are read back from the spool when sent.
  uint64_t max_outbox_bytes = uint64_t{64} << 20;
  // A trajectory larger than this (encoded) is refused by write(); the
  // receiver announces its own limit, and records above it are set aside.
  uint64_t max_message_bytes = uint64_t{64} << 20;
  // How long write() waits for room in a full spool before it throws.
  std::chrono::milliseconds write_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds heartbeat_interval{1000};
  // Nothing heard from the receiver for this long: reconnect and resend.
  std::chrono::milliseconds heartbeat_timeout{10000};
  // Waits between connection attempts grow to this.
  std::chrono::milliseconds max_reconnect_delay{5000};
  // fdatasync every spooled record (survives a machine crash, not only a
  // killed process); costs a disk flush per write().
  bool fsync = false;
  CurveClientOptions curve;
  // Where warnings and connection events go; default: stderr.
  std::function<void(const std::string&)> log;
};

struct SenderStats {
  uint64_t written = 0;     // write() calls that spooled a trajectory
  uint64_t sent = 0;        // traj messages sent, resends included
  uint64_t resent = 0;      // of which were sent before (reconnects)
  uint64_t acked = 0;       // acknowledged by the receiver
  uint64_t rejected = 0;    // set aside over the spool's life (TrajectorySpool::set_aside)
  uint64_t reconnects = 0;  // sessions after the first
  uint64_t unacked = 0;     // in the spool, waiting for an ack
  uint64_t spool_bytes = 0;
  uint64_t next_seq = 0;
  uint64_t credit = 0;    // granted by the receiver in this session
  uint64_t inflight = 0;  // sent in this session, not acknowledged
  bool connected = false;
  // Over the last 65536 acks, in milliseconds: from sending a trajectory to
  // its ack (the receiver and its trainer's ack() included), and from
  // write() to the ack (time waiting for credit or a connection included).
  double ack_latency_p50_ms = 0;
  double ack_latency_p99_ms = 0;
  double ack_latency_max_ms = 0;
  double delivery_latency_p50_ms = 0;
  double delivery_latency_p99_ms = 0;
};

class TrajectorySender : public TrajectorySink {
 public:
  // Opens the spool (recovering what a previous process left) and starts
  // connecting. InputError for a bad configuration (named field), SystemError
  // when the spool cannot be used.
  explicit TrajectorySender(SenderConfig config);
  // Stops the background thread. Unacknowledged trajectories stay in the
  // spool for the next sender on the same directory.
  ~TrajectorySender() override;
  TrajectorySender(const TrajectorySender&) = delete;
  TrajectorySender& operator=(const TrajectorySender&) = delete;

  void write(const Trajectory& trajectory) override;
  bool flush(std::chrono::milliseconds timeout) override;

  // Any trajectory object with a non-empty string "id" (the stream treats
  // the rest as opaque). InputError when it has none or is too large.
  void write_value(const json& trajectory);
  // A trajectory already encoded as a MessagePack map; returns its seq.
  uint64_t write_encoded(std::string_view id, std::string_view msgpack_map);

  SenderStats stats() const;
  const std::string& worker_id() const;
  const std::string& instance() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kforge::rollout
