// Where a rollout worker puts each finished trajectory: a JSONL file, the
// reliable stream to the trainer (trajectory_sender.h), or both.
#pragma once

#include <chrono>

#include "kforge/core/trajectory.h"

namespace kforge::rollout {

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

}  // namespace kforge::rollout
