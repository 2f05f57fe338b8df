// The sender's on-disk spool: every trajectory not yet acknowledged by the
// receiver, kept so that a worker killed at any point (SIGKILL included) and
// restarted on the same directory resends exactly what was not acknowledged.
//
// Layout of the directory (trainer_bridge/STREAM.md, "The sender's spool"):
//   spool.json          {"format": 1, "worker": ..., "instance": ...}
//   lock                flock(2)ed by the process that holds the spool
//   seg-<first seq>.kfs records, appended; one active segment at a time
//   acks.log            acknowledged seq ranges, 16 bytes each, appended
//   rejected.jsonl      records the receiver refused for good (+ rejected/)
//
// A record is written with one write(2) before append() returns, so it
// survives the process being killed (with `fsync`, also a machine crash). A
// record cut short by a kill is the last one of the active segment; it fails
// its length or CRC check and is dropped at the next open (append() had not
// returned, so nobody was told it was held). Damage anywhere else is an error
// that names the file and offset: records are never skipped silently.
//
// Sequence numbers are assigned here, one per record, increasing, never
// reused: segment names carry the first seq they hold and the active segment
// is never deleted, so the next seq survives restarts even when every record
// was acknowledged.
//
// Not thread-safe: the TrajectorySender serializes access.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/core/unique_fd.h"

namespace kforge::rollout {

struct SpoolOptions {
  std::filesystem::path dir;
  std::string worker_id;
  // Disk the spool may use (segments + ack log); append() past it is refused.
  uint64_t max_bytes = uint64_t{1} << 30;
  // Segment size; 0: max_bytes / 8, clamped to [64 KiB, 64 MiB]. Segments are
  // freed whole, once every record in them is acknowledged.
  uint64_t segment_bytes = 0;
  // fdatasync each record before append() returns (machine-crash safety).
  bool fsync = false;
};

// A record waiting for its acknowledgement.
struct SpoolRecord {
  uint64_t seq = 0;
  std::string id;
  uint64_t segment = 0;  // first seq of the segment holding it
  uint64_t offset = 0;   // of the payload in the segment file
  uint32_t size = 0;     // payload bytes
};

class TrajectorySpool {
 public:
  // Opens (recovering what is there) or creates the spool. InputError for bad
  // options or a spool that belongs to another worker id; SystemError when the
  // directory cannot be used, is locked by another process, or is damaged.
  explicit TrajectorySpool(SpoolOptions options);
  ~TrajectorySpool();
  TrajectorySpool(const TrajectorySpool&) = delete;
  TrajectorySpool& operator=(const TrajectorySpool&) = delete;

  const std::string& worker_id() const { return options_.worker_id; }
  // Random id made when the spool was created: a receiver that sees a worker
  // id with another instance knows the seq space was reset.
  const std::string& instance() const { return instance_; }
  const std::filesystem::path& dir() const { return options_.dir; }
  uint64_t next_seq() const { return next_seq_; }

  // Unacknowledged records by seq.
  const std::map<uint64_t, SpoolRecord>& pending() const { return pending_; }
  uint64_t pending_bytes() const { return pending_bytes_; }
  uint64_t disk_bytes() const;
  uint64_t max_bytes() const { return options_.max_bytes; }
  // Bytes a record takes on disk.
  static uint64_t record_bytes(size_t id_bytes, size_t payload_bytes);
  // Whether a record of this size could be appended now without passing
  // max_bytes.
  bool fits(size_t id_bytes, size_t payload_bytes) const;

  // Appends one record and returns its seq. SystemError if it cannot be
  // written (the spool is unchanged then) or does not fit.
  uint64_t append(std::string_view id, std::string_view payload);
  // The payload of a pending record, read back from disk.
  std::string read(uint64_t seq) const;
  // Records acknowledgements; returns how many of `seqs` were pending. Frees
  // segments with nothing pending left.
  size_t acknowledge(const std::vector<uint64_t>& seqs);
  // Copies a pending record to rejected/<seq>.msgpack, notes it with
  // `reason` in rejected.jsonl and acknowledges it: the receiver will never
  // take it, and it must not block the spool, but it is not thrown away.
  void set_aside(uint64_t seq, const std::string& reason);
  // How many records set_aside() has written since the spool was created.
  uint64_t rejected_count() const { return rejected_; }

 private:
  struct Segment {
    uint64_t first_seq = 0;
    uint64_t last_seq = 0;  // 0 while empty
    uint64_t bytes = 0;
    size_t pending = 0;
    UniqueFd fd;
    std::filesystem::path path;
  };

  void load_or_create_meta();
  void recover();
  void scan_segment(Segment& seg, bool is_last);
  void load_acks(std::vector<std::pair<uint64_t, uint64_t>>* ranges) const;
  void rewrite_acks();
  void append_acks(const std::vector<uint64_t>& seqs);
  void release_segment(std::map<uint64_t, Segment>::iterator it);
  Segment& active_segment_for(uint64_t record_size);

  SpoolOptions options_;
  std::string instance_;
  UniqueFd lock_fd_;  // declared first, closed last: holds the flock until the files are closed
  UniqueFd acks_fd_;
  uint64_t acks_bytes_ = 0;
  uint64_t next_seq_ = 1;
  uint64_t rejected_ = 0;
  std::map<uint64_t, Segment> segments_;  // by first seq; the last one is active
  std::map<uint64_t, SpoolRecord> pending_;
  uint64_t pending_bytes_ = 0;
};

}  // namespace kforge::rollout
