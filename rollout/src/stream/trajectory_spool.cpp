#include "kforge/rollout/stream/trajectory_spool.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "kforge/core/errno_text.h"
#include "kforge/core/error.h"
#include "kforge/core/unique_fd.h"
#include "kforge/rollout/stream/stream_protocol.h"
#include "spool_file_io.h"
#include "spool_format.h"

namespace kforge::rollout {

namespace fs = std::filesystem;
using json = nlohmann::json;
using internal::fsync_dir;
using internal::kAckLogCompactBytes;
using internal::kMaxSegment;
using internal::kMinSegment;
using internal::kSpoolHeaderBytes;
using internal::kSpoolMagic;
using internal::pread_all;
using internal::put_le;
using internal::record_crc;
using internal::segment_name;
using internal::write_all;
using internal::write_atomically;

TrajectorySpool::TrajectorySpool(SpoolOptions options) : options_(std::move(options)) {
  if (std::string why = stream::check_worker_id(options_.worker_id); !why.empty()) {
    throw InputError("spool: worker id \"" + options_.worker_id + "\": " + why);
  }
  if (options_.dir.empty()) throw InputError("spool: the spool directory is empty; give one per worker");
  if (options_.max_bytes < 2 * kMinSegment) {
    throw InputError("spool: max_bytes must be at least " + std::to_string(2 * kMinSegment) + ", got " +
                     std::to_string(options_.max_bytes));
  }
  if (options_.segment_bytes == 0) {
    options_.segment_bytes = std::clamp(options_.max_bytes / 8, kMinSegment, kMaxSegment);
  }
  if (options_.segment_bytes > options_.max_bytes / 2) {
    throw InputError("spool: segment_bytes (" + std::to_string(options_.segment_bytes) +
                     ") must be at most half of max_bytes (" + std::to_string(options_.max_bytes) + ")");
  }
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) throw SystemError("spool: cannot create " + options_.dir.string() + ": " + ec.message());

  const fs::path lock_path = options_.dir / "lock";
  lock_fd_.reset(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!lock_fd_) throw SystemError("spool: cannot open " + lock_path.string() + ": " + errno_text());
  if (::flock(lock_fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    // Only for the message: an unreadable pid leaves it empty.
    if (::pread(lock_fd_.get(), pid, sizeof pid - 1, 0) < 0) pid[0] = '\0';
    throw SystemError("spool: " + options_.dir.string() + " is in use by another process (pid " +
                      std::string(pid).substr(0, std::string(pid).find('\n')) +
                      "); every sender needs its own spool directory");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_.get(), 0) == 0) (void)!::pwrite(lock_fd_.get(), pid.data(), pid.size(), 0);

  // A throw from here on closes every file opened so far: they are members.
  load_or_create_meta();
  recover();
}

// Members go in reverse order: the segments, the ack log, then the lock
// (releasing the flock only once nothing of the spool is open).
TrajectorySpool::~TrajectorySpool() = default;

void TrajectorySpool::rewrite_acks() {
  // Only acknowledgements of records still on disk matter: the seqs of the
  // live segments that are not pending.
  std::vector<uint64_t> acked;
  std::string bytes;
  for (const auto& [first, seg] : segments_) {
    if (seg.last_seq == 0) continue;
    uint64_t s = seg.first_seq;
    auto it = pending_.lower_bound(seg.first_seq);
    while (s <= seg.last_seq) {
      const uint64_t stop = (it != pending_.end() && it->first <= seg.last_seq) ? it->first : seg.last_seq + 1;
      if (s < stop) {
        char entry[16];
        put_le(entry, s, 8);
        put_le(entry + 8, stop - 1, 8);
        bytes.append(entry, 16);
      }
      if (stop > seg.last_seq) break;
      s = stop + 1;
      ++it;
    }
  }
  acks_fd_.reset();
  const fs::path path = options_.dir / "acks.log";
  write_atomically(path, bytes);
  acks_fd_.reset(::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
  if (!acks_fd_) throw SystemError("spool: cannot open " + path.string() + ": " + errno_text());
  acks_bytes_ = bytes.size();
}

uint64_t TrajectorySpool::disk_bytes() const {
  uint64_t total = acks_bytes_;
  for (const auto& [first, seg] : segments_) total += seg.bytes;
  return total;
}

uint64_t TrajectorySpool::record_bytes(size_t id_bytes, size_t payload_bytes) {
  return kSpoolHeaderBytes + id_bytes + payload_bytes;
}

bool TrajectorySpool::fits(size_t id_bytes, size_t payload_bytes) const {
  return disk_bytes() + record_bytes(id_bytes, payload_bytes) <= options_.max_bytes;
}

TrajectorySpool::Segment& TrajectorySpool::active_segment_for(uint64_t record_size) {
  if (!segments_.empty()) {
    auto active = std::prev(segments_.end());
    if (active->second.bytes == 0 || active->second.bytes + record_size <= options_.segment_bytes) {
      return active->second;
    }
  }
  Segment seg;
  seg.first_seq = next_seq_;
  seg.path = options_.dir / segment_name(next_seq_);
  seg.fd.reset(::open(seg.path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!seg.fd) throw SystemError("spool: cannot create " + seg.path.string() + ": " + errno_text());
  if (options_.fsync) fsync_dir(options_.dir);
  auto previous = segments_.empty() ? segments_.end() : std::prev(segments_.end());
  Segment& created = segments_.emplace(seg.first_seq, std::move(seg)).first->second;
  // The old active segment may hold nothing pending any more.
  if (previous != segments_.end() && previous->second.pending == 0) release_segment(previous);
  return created;
}

uint64_t TrajectorySpool::append(std::string_view id, std::string_view payload) {
  if (id.size() > stream::kMaxTrajectoryIdBytes) {
    throw SystemError("spool: trajectory id longer than " + std::to_string(stream::kMaxTrajectoryIdBytes) + " bytes");
  }
  if (payload.size() > UINT32_MAX) throw SystemError("spool: a record must be smaller than 4 GiB");
  const uint64_t size = record_bytes(id.size(), payload.size());
  if (!fits(id.size(), payload.size())) {
    throw SystemError("spool: " + options_.dir.string() + " is full (" + std::to_string(disk_bytes()) + " of " +
                      std::to_string(options_.max_bytes) + " bytes)");
  }
  Segment& seg = active_segment_for(size);
  const uint64_t seq = next_seq_;
  char header[kSpoolHeaderBytes];
  std::memcpy(header, kSpoolMagic, 4);
  put_le(header + 4, payload.size(), 4);
  put_le(header + 8, seq, 8);
  put_le(header + 16, id.size(), 2);
  put_le(header + 18, 0, 2);
  put_le(header + 20, record_crc(header, id, payload), 4);
  try {
    // One writev: header, id and payload land together or the tail is torn.
    iovec parts[3] = {{header, kSpoolHeaderBytes},
                      {const_cast<char*>(id.data()), id.size()},
                      {const_cast<char*>(payload.data()), payload.size()}};
    size_t done = 0;
    while (done < size) {
      int first = 0;
      size_t skip = done;
      while (first < 3 && skip >= parts[first].iov_len) skip -= parts[first++].iov_len;
      iovec rest[3];
      int n = 0;
      for (int i = first; i < 3; ++i) rest[n++] = parts[i];
      rest[0].iov_base = static_cast<char*>(rest[0].iov_base) + skip;
      rest[0].iov_len -= skip;
      const ssize_t w = ::writev(seg.fd.get(), rest, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) throw SystemError("spool: cannot write " + seg.path.string() + ": " + errno_text());
      done += static_cast<size_t>(w);
    }
    if (options_.fsync && ::fdatasync(seg.fd.get()) != 0) {
      throw SystemError("spool: fdatasync of " + seg.path.string() + " failed: " + errno_text());
    }
  } catch (...) {
    // Leave no partial record behind: the next append starts where this one did.
    if (::ftruncate(seg.fd.get(), static_cast<off_t>(seg.bytes)) != 0) {
      std::fprintf(stderr, "kforge spool: cannot truncate %s after a failed write: %s\n", seg.path.c_str(),
                   errno_text().c_str());
    }
    throw;
  }
  SpoolRecord rec;
  rec.seq = seq;
  rec.id.assign(id);
  rec.segment = seg.first_seq;
  rec.offset = seg.bytes + kSpoolHeaderBytes + id.size();
  rec.size = static_cast<uint32_t>(payload.size());
  pending_.emplace(seq, std::move(rec));
  pending_bytes_ += payload.size();
  seg.bytes += size;
  seg.last_seq = seq;
  ++seg.pending;
  ++next_seq_;
  return seq;
}

std::string TrajectorySpool::read(uint64_t seq) const {
  const auto it = pending_.find(seq);
  if (it == pending_.end()) throw SystemError("spool: seq " + std::to_string(seq) + " is not pending");
  const Segment& seg = segments_.at(it->second.segment);
  std::string payload(it->second.size, '\0');
  if (!pread_all(seg.fd.get(), payload.data(), payload.size(), it->second.offset)) {
    throw SystemError("spool: " + seg.path.string() + " ends before the record of seq " + std::to_string(seq));
  }
  return payload;
}

void TrajectorySpool::append_acks(const std::vector<uint64_t>& seqs) {
  std::string bytes;
  for (const auto& [first, last] : stream::to_ranges(seqs)) {
    char entry[16];
    put_le(entry, first, 8);
    put_le(entry + 8, last, 8);
    bytes.append(entry, 16);
  }
  write_all(acks_fd_.get(), bytes.data(), bytes.size(), options_.dir / "acks.log");
  acks_bytes_ += bytes.size();
}

size_t TrajectorySpool::acknowledge(const std::vector<uint64_t>& seqs) {
  std::vector<uint64_t> acked;
  for (uint64_t s : seqs) {
    auto it = pending_.find(s);
    if (it == pending_.end()) continue;
    pending_bytes_ -= it->second.size;
    --segments_.at(it->second.segment).pending;
    pending_.erase(it);
    acked.push_back(s);
  }
  if (acked.empty()) return 0;
  // Recorded before any segment is deleted: a kill in between leaves a
  // segment whose records the ack log already covers.
  append_acks(acked);
  for (auto it = segments_.begin(); it != segments_.end() && std::next(it) != segments_.end();) {
    auto next = std::next(it);
    if (it->second.pending == 0) release_segment(it);
    it = next;
  }
  if (acks_bytes_ > kAckLogCompactBytes) rewrite_acks();
  return acked.size();
}

void TrajectorySpool::release_segment(std::map<uint64_t, Segment>::iterator it) {
  it->second.fd.reset();
  if (::unlink(it->second.path.c_str()) != 0 && errno != ENOENT) {
    std::fprintf(stderr, "kforge spool: cannot delete %s: %s\n", it->second.path.c_str(), errno_text().c_str());
  }
  segments_.erase(it);
}

void TrajectorySpool::set_aside(uint64_t seq, const std::string& reason) {
  const auto it = pending_.find(seq);
  if (it == pending_.end()) return;
  const fs::path dir = options_.dir / "rejected";
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path file = dir / (std::to_string(seq) + ".msgpack");
  const std::string payload = read(seq);
  write_atomically(file, payload);
  const json line = {{"seq", seq},
                     {"id", it->second.id},
                     {"worker", options_.worker_id},
                     {"reason", reason},
                     {"file", "rejected/" + file.filename().string()}};
  const fs::path index = options_.dir / "rejected.jsonl";
  {
    const UniqueFd fd(::open(index.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!fd) throw SystemError("spool: cannot open " + index.string() + ": " + errno_text());
    const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    write_all(fd.get(), text.data(), text.size(), index);
    ::fsync(fd.get());
  }
  ++rejected_;
  acknowledge({seq});
}

}  // namespace kforge::rollout
