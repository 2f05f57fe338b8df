// A TrajectorySink that appends each trajectory as one JSON line
// (to_json(Trajectory), docs/rollout.md): whole lines only, so a killed run
// leaves at most a torn last line that readers skip (core/jsonl.h).
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>

#include "kforge/core/jsonl.h"
#include "kforge/core/trajectory_sink.h"

namespace kforge::rollout {

class JsonlTrajectorySink : public TrajectorySink {
 public:
  // `append`: keep what the file holds. `sync`: fsync every line.
  JsonlTrajectorySink(const std::filesystem::path& path, bool append = false, bool sync = false);
  void write(const Trajectory& trajectory) override;
  bool flush(std::chrono::milliseconds timeout) override;
  size_t written() const;
  const std::filesystem::path& path() const { return writer_.path(); }

 private:
  mutable std::mutex mu_;
  JsonlWriter writer_;
};

// Reads trajectories back from a JSONL file (a torn last line is skipped).
// InputError naming the file and line for a line that is not a trajectory.
std::vector<Trajectory> read_trajectories(const std::filesystem::path& path);

}  // namespace kforge::rollout
