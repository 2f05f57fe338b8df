// What a trajectory receiver remembers across restarts: per worker id, the
// spool instance its sequence numbers belong to and the seqs the trainer has
// acknowledged. A receiver consults it before delivering, so a trajectory the
// trainer acknowledged is never delivered again, even after the receiver was
// killed and restarted, and a worker whose seq space was reset (another
// spool under the same worker id) is refused rather than deduplicated into
// silence.
//
// The state directory holds two text files in one line format (the Python
// receiver reads and writes the same; trainer_bridge/STREAM.md):
//   state.txt   a snapshot, replaced atomically
//   acks.log    lines appended since the snapshot, one write(2) per call
// lines:  "kforge-receiver-state 1"         (first line of state.txt)
//         "claim <worker> <instance>"
//         "ack <worker> <first> <last> [<first> <last> ...]"
// A line cut short by a kill (no newline) is ignored: the call that wrote it
// had not returned, so its acknowledgements were never sent to a sender.
//
// Not thread-safe: the receiver serializes access.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kforge/core/unique_fd.h"

namespace kforge::rollout {

// A set of sequence numbers as merged, inclusive ranges.
class SeqRanges {
 public:
  void insert(uint64_t first, uint64_t last);
  void insert(uint64_t seq) { insert(seq, seq); }
  bool contains(uint64_t seq) const;
  // The largest n such that 1..n are all in the set (0 if 1 is not).
  uint64_t through() const;
  const std::map<uint64_t, uint64_t>& ranges() const { return ranges_; }
  bool empty() const { return ranges_.empty(); }

 private:
  std::map<uint64_t, uint64_t> ranges_;  // first -> last, disjoint, not adjacent
};

class ReceiverState {
 public:
  // In memory only when `dir` is empty. SystemError when the directory cannot
  // be used or its files are damaged beyond a torn last line.
  explicit ReceiverState(std::filesystem::path dir = {}, bool fsync = false);
  ~ReceiverState();
  ReceiverState(const ReceiverState&) = delete;
  ReceiverState& operator=(const ReceiverState&) = delete;

  bool persistent() const { return !dir_.empty(); }
  bool acknowledged(const std::string& worker, uint64_t seq) const;
  uint64_t acked_through(const std::string& worker) const;
  // Ties `worker` to `instance` the first time; false (and the instance on
  // record in *known) when the worker is already tied to another one.
  bool claim(const std::string& worker, const std::string& instance, std::string* known);
  // Records acknowledgements, durably (write(2); with fsync, fdatasync)
  // before returning. One write for all workers.
  void acknowledge(const std::map<std::string, std::vector<uint64_t>>& seqs_by_worker);
  size_t workers() const { return workers_.size(); }

 private:
  struct Worker {
    std::string instance;
    SeqRanges acked;
  };
  void load();
  void apply_line(const std::string& line, const std::filesystem::path& file, size_t line_number);
  void append(const std::string& lines);
  void compact();

  std::filesystem::path dir_;
  bool fsync_ = false;
  UniqueFd log_fd_;
  uint64_t log_bytes_ = 0;
  std::map<std::string, Worker> workers_;
};

}  // namespace kforge::rollout
