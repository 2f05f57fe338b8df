// Where a rollout worker puts each finished trajectory: a JSONL file
// (rollout/jsonl_sink.h), the reliable stream to the trainer
// (rollout/stream/trajectory_sender.h), or both. It lives in core so that the
// stream (kforge_rollout_stream) and a C++ trainer that links the receiver
// need core, MessagePack and ZeroMQ only, not the rollout workers and the env.
#pragma once

#include <chrono>

#include "kforge/core/trajectory.h"

namespace kforge {

class TrajectorySink {
 public:
  virtual ~TrajectorySink() = default;
  // Takes one complete trajectory. Returns once the sink holds it durably
  // (written, or spooled to disk until the receiver acknowledges it); may
  // block for back-pressure. Throws SystemError if it cannot.
  virtual void write(const Trajectory& trajectory) = 0;
  // Waits until everything written has reached its destination (for the
  // stream: acknowledged by the receiver), up to `timeout`; false if not.
  virtual bool flush(std::chrono::milliseconds timeout) = 0;
};

}  // namespace kforge
