// Received trajectories stored exactly once in a JSONL file, one line each,
// across kills of the receiving process (what `kforge receive` does with a
// TrajectoryReceiver; trainer_bridge/STREAM.md).
//
// Exactly once into the file, per batch: (1) the checkpoint in the state
// directory records the keys of the batch about to be written (the file's
// size before it is already there); (2) the lines are written (one write(2);
// with fsync, fdatasync); (3) the batch is acknowledged; (4) the checkpoint
// records the new size and no pending keys. Killed anywhere in between, the
// next open finds the lines past the recorded size, which are the first
// lines of the pending batch in order: their keys are acknowledged as stored
// (TrajectoryReceiver::ack_stored), so their resends are acknowledged, not
// written again; the rest of the batch is resent and written. A torn last
// line is cut.
//
// The checkpoint is STATE_DIR/receive-out.json:
//   {"out": ABSOLUTE_PATH, "committed_bytes": N, "records": N,
//    "writing": [[worker, seq], ...]}
// Not thread-safe: one store per output, used by one thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kforge/core/unique_fd.h"
#include "kforge/rollout/stream/trajectory_receiver.h"

namespace kforge::rollout {

// What the checkpoint file holds.
struct FileStoreCheckpoint {
  std::string out;
  uint64_t committed_bytes = 0;      // the file's size after the last acknowledged batch
  uint64_t records = 0;              // lines up to committed_bytes
  std::vector<DeliveryKey> writing;  // keys of the batch being written, in order
};

class TrajectoryFileStore {
 public:
  // Called with the keys of lines once they are in the file, before the
  // checkpoint counts them: the receiver's ack (or ack_stored on recovery).
  using AcknowledgeFn = std::function<void(const std::vector<DeliveryKey>&)>;

  // Opens (creating) `out` and STATE_DIR/receive-out.json, and recovers what
  // a killed run left past the checkpoint: a torn last line is cut, whole
  // lines are kept as recovered(). `out` is made absolute; the state
  // directory and out's folder are created. InputError (naming the field or
  // the file) for a checkpoint of another output, a file shorter than the
  // checkpoint says or with more lines than were pending; SystemError for
  // I/O failures.
  TrajectoryFileStore(const std::filesystem::path& out, const std::filesystem::path& state_dir, bool fsync);
  ~TrajectoryFileStore();
  TrajectoryFileStore(const TrajectoryFileStore&) = delete;
  TrajectoryFileStore& operator=(const TrajectoryFileStore&) = delete;

  // Keys of the lines a killed run wrote but never checkpointed, in order.
  const std::vector<DeliveryKey>& recovered() const { return recovered_; }
  // Whether opening cut a torn (newline-less) last line off the file.
  bool dropped_torn_line() const { return dropped_torn_line_; }
  // Acknowledges recovered() through `acknowledge_stored`, then checkpoints
  // them as committed. Must be called once before append().
  void finish_recovery(const AcknowledgeFn& acknowledge_stored);

  // Appends one JSON line per trajectory, in order, and acknowledges them
  // through `acknowledge` between the write and the checkpoint (see above).
  void append(const std::vector<Delivery>& batch, const AcknowledgeFn& acknowledge);

  // Lines committed (recovered ones count once finish_recovery returned).
  uint64_t records() const { return checkpoint_.records; }
  const std::string& out() const { return checkpoint_.out; }
  const std::filesystem::path& checkpoint_file() const { return checkpoint_file_; }

  // The checkpoint file alone (for tools and tests): the default one for
  // `out` when the file does not exist; InputError naming the field for a
  // malformed file or one recorded for another output.
  static FileStoreCheckpoint load_checkpoint(const std::filesystem::path& file, const std::string& out);

 private:
  void save_checkpoint() const;

  std::filesystem::path checkpoint_file_;
  bool fsync_ = false;
  UniqueFd fd_;
  FileStoreCheckpoint checkpoint_;
  std::vector<DeliveryKey> recovered_;
  uint64_t recovered_size_ = 0;  // the file's size once recovered
  bool dropped_torn_line_ = false;
  bool recovery_finished_ = false;
};

}  // namespace kforge::rollout
