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
#include <random>

#include "crc32c.h"
#include "kforge/core/errno_text.h"
#include "kforge/core/error.h"
#include "kforge/rollout/stream/stream_protocol.h"

namespace kforge::rollout {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kMagic[4] = {'K', 'F', 'R', '1'};
constexpr size_t kHeaderBytes = 24;
constexpr int kFormat = 1;
constexpr uint64_t kMinSegment = uint64_t{64} << 10;
constexpr uint64_t kMaxSegment = uint64_t{64} << 20;
// The ack log is rewritten (keeping only what live segments need) past this.
constexpr uint64_t kAckLogCompactBytes = uint64_t{1} << 20;

void put_le(char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

uint32_t record_crc(const char* header, std::string_view id, std::string_view payload) {
  uint32_t crc = detail::crc32c(0, header + 4, 16);
  crc = detail::crc32c(crc, id.data(), id.size());
  return detail::crc32c(crc, payload.data(), payload.size());
}

// Reads exactly n bytes at `offset`; false at end of file.
bool pread_all(int fd, char* buf, size_t n, uint64_t offset) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, buf + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw SystemError("spool: read failed: " + errno_text());
    if (r == 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

void write_all(int fd, const char* buf, size_t n, const fs::path& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw SystemError("spool: cannot write " + path.string() + ": " + errno_text());
    done += static_cast<size_t>(w);
  }
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Writes `text` to `path` through a temporary file and a rename, so that the
// file is either the old or the new version after a crash.
void write_atomically(const fs::path& path, std::string_view text) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw SystemError("spool: cannot create " + tmp.string() + ": " + errno_text());
  try {
    write_all(fd, text.data(), text.size(), tmp);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    throw SystemError("spool: cannot rename " + tmp.string() + ": " + errno_text());
  }
  fsync_dir(path.parent_path());
}

std::string random_instance() {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 4; ++i) {
    uint32_t x = rd();
    for (int j = 0; j < 8; ++j, x >>= 4) out += kHex[x & 15];
  }
  return out;
}

std::string segment_name(uint64_t first_seq) {
  char name[40];
  std::snprintf(name, sizeof name, "seg-%020llu.kfs", static_cast<unsigned long long>(first_seq));
  return name;
}

// First seq from "seg-<20 digits>.kfs", or 0 if the name is not a segment's.
uint64_t parse_segment_name(const std::string& name) {
  if (name.size() != 28 || name.rfind("seg-", 0) != 0 || name.substr(24) != ".kfs") return 0;
  uint64_t v = 0;
  for (size_t i = 4; i < 24; ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return v;
}

}  // namespace

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
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) throw SystemError("spool: cannot open " + lock_path.string() + ": " + errno_text());
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    // Only for the message: an unreadable pid leaves it empty.
    if (::pread(lock_fd_, pid, sizeof pid - 1, 0) < 0) pid[0] = '\0';
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw SystemError("spool: " + options_.dir.string() + " is in use by another process (pid " +
                      std::string(pid).substr(0, std::string(pid).find('\n')) +
                      "); every sender needs its own spool directory");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) == 0) (void)!::pwrite(lock_fd_, pid.data(), pid.size(), 0);

  try {
    load_or_create_meta();
    recover();
  } catch (...) {
    for (auto& [first, seg] : segments_) {
      if (seg.fd >= 0) ::close(seg.fd);
    }
    if (acks_fd_ >= 0) ::close(acks_fd_);
    ::close(lock_fd_);
    throw;
  }
}

TrajectorySpool::~TrajectorySpool() {
  for (auto& [first, seg] : segments_) {
    if (seg.fd >= 0) ::close(seg.fd);
  }
  if (acks_fd_ >= 0) ::close(acks_fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

void TrajectorySpool::load_or_create_meta() {
  const fs::path meta = options_.dir / "spool.json";
  std::error_code ec;
  if (!fs::exists(meta, ec)) {
    for (const auto& entry : fs::directory_iterator(options_.dir)) {
      if (parse_segment_name(entry.path().filename().string()) != 0) {
        throw SystemError("spool: " + options_.dir.string() +
                          " holds segments but no spool.json; it was damaged or is not a spool. Move it away "
                          "(its records are kept in the seg-*.kfs files) and start again");
      }
    }
    instance_ = random_instance();
    const json doc = {{"format", kFormat}, {"worker", options_.worker_id}, {"instance", instance_}};
    write_atomically(meta, doc.dump() + "\n");
    return;
  }
  const uint64_t size = fs::file_size(meta, ec);
  if (ec || size > 65536) throw SystemError("spool: " + meta.string() + " is unreadable or too large");
  std::string text(size, '\0');
  const int fd = ::open(meta.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw SystemError("spool: cannot open " + meta.string() + ": " + errno_text());
  const bool ok = pread_all(fd, text.data(), text.size(), 0);
  ::close(fd);
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!ok || !doc.is_object() || doc.value("format", 0) != kFormat || !doc.contains("worker") ||
      !doc["worker"].is_string() || !doc.contains("instance") || !doc["instance"].is_string()) {
    throw SystemError("spool: " + meta.string() + " is not a spool description of format " + std::to_string(kFormat) +
                      "; move the directory away and start again");
  }
  if (doc["worker"].get<std::string>() != options_.worker_id) {
    throw InputError("spool: " + options_.dir.string() + " belongs to worker \"" + doc["worker"].get<std::string>() +
                     "\", not \"" + options_.worker_id +
                     "\"; a spool is tied to the worker id its sequence numbers were issued under. Use that "
                     "worker id, or another spool directory");
  }
  instance_ = doc["instance"].get<std::string>();
  if (std::string why = stream::check_instance(instance_); !why.empty()) {
    throw SystemError("spool: " + meta.string() + ": " + why);
  }
}

void TrajectorySpool::scan_segment(Segment& seg, bool is_last) {
  uint64_t offset = 0;
  std::string body;
  const uint64_t file_size = static_cast<uint64_t>(fs::file_size(seg.path));
  for (;;) {
    if (offset == file_size) break;
    char header[kHeaderBytes];
    std::string problem;
    uint32_t payload_len = 0;
    uint64_t seq = 0;
    uint16_t id_len = 0;
    if (file_size - offset < kHeaderBytes || !pread_all(seg.fd, header, kHeaderBytes, offset)) {
      problem = "a record header is cut short";
    } else if (std::memcmp(header, kMagic, 4) != 0) {
      problem = "no record starts here";
    } else {
      payload_len = static_cast<uint32_t>(get_le(header + 4, 4));
      seq = get_le(header + 8, 8);
      id_len = static_cast<uint16_t>(get_le(header + 16, 2));
      const uint64_t body_len = uint64_t{id_len} + payload_len;
      if (file_size - offset - kHeaderBytes < body_len) {
        problem = "a record is cut short";
      } else {
        body.resize(body_len);
        pread_all(seg.fd, body.data(), body.size(), offset + kHeaderBytes);
        const std::string_view id(body.data(), id_len);
        const std::string_view payload(body.data() + id_len, payload_len);
        if (record_crc(header, id, payload) != static_cast<uint32_t>(get_le(header + 20, 4))) {
          problem = "a record fails its checksum";
        } else if (seq < seg.first_seq || (seg.last_seq != 0 && seq != seg.last_seq + 1)) {
          problem = "sequence number " + std::to_string(seq) + " is out of order";
        }
      }
    }
    if (!problem.empty()) {
      if (!is_last) {
        throw SystemError("spool: " + seg.path.string() + " is damaged at offset " + std::to_string(offset) + " (" +
                          problem +
                          "); records after it cannot be trusted. Move the spool directory away to start "
                          "again (nothing in it is deleted)");
      }
      // The active segment's tail: a record that a killed process was still
      // writing. append() had not returned, so it was never reported held.
      if (::ftruncate(seg.fd, static_cast<off_t>(offset)) != 0) {
        throw SystemError("spool: cannot truncate " + seg.path.string() + ": " + errno_text());
      }
      std::fprintf(stderr, "kforge spool: dropped an incomplete record at the end of %s (offset %llu: %s)\n",
                   seg.path.c_str(), static_cast<unsigned long long>(offset), problem.c_str());
      break;
    }
    SpoolRecord rec;
    rec.seq = seq;
    rec.id.assign(body.data(), id_len);
    rec.segment = seg.first_seq;
    rec.offset = offset + kHeaderBytes + id_len;
    rec.size = payload_len;
    pending_.emplace(seq, std::move(rec));
    pending_bytes_ += payload_len;
    ++seg.pending;
    seg.last_seq = seq;
    offset += kHeaderBytes + id_len + payload_len;
  }
  seg.bytes = offset;
}

void TrajectorySpool::load_acks(std::vector<std::pair<uint64_t, uint64_t>>* ranges) const {
  const fs::path path = options_.dir / "acks.log";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[16 * 4096];
  uint64_t offset = 0;
  for (;;) {
    const ssize_t r = ::pread(fd, buf, sizeof buf, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    // A torn last entry (fewer than 16 bytes) was an ack not yet recorded.
    const size_t whole = static_cast<size_t>(r) / 16 * 16;
    for (size_t i = 0; i < whole; i += 16) ranges->emplace_back(get_le(buf + i, 8), get_le(buf + i + 8, 8));
    offset += whole;
    if (whole < static_cast<size_t>(r) || whole == 0) break;
  }
  ::close(fd);
}

void TrajectorySpool::recover() {
  for (const auto& entry : fs::directory_iterator(options_.dir)) {
    const uint64_t first = parse_segment_name(entry.path().filename().string());
    if (first == 0) continue;
    Segment seg;
    seg.first_seq = first;
    seg.path = entry.path();
    segments_.emplace(first, std::move(seg));
  }
  for (auto it = segments_.begin(); it != segments_.end(); ++it) {
    Segment& seg = it->second;
    seg.fd = ::open(seg.path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
    if (seg.fd < 0) throw SystemError("spool: cannot open " + seg.path.string() + ": " + errno_text());
    scan_segment(seg, std::next(it) == segments_.end());
    next_seq_ = std::max({next_seq_, seg.first_seq, seg.last_seq + 1});
  }
  // Segments must not overlap: each starts after the one before ends.
  uint64_t prev_last = 0;
  for (const auto& [first, seg] : segments_) {
    if (prev_last != 0 && first <= prev_last) {
      throw SystemError("spool: " + seg.path.string() + " overlaps the segment before it; the spool was damaged");
    }
    if (seg.last_seq != 0) prev_last = seg.last_seq;
  }

  std::vector<std::pair<uint64_t, uint64_t>> acked;
  load_acks(&acked);
  for (const auto& [first, last] : acked) {
    if (first > last) continue;
    for (auto it = pending_.lower_bound(first); it != pending_.end() && it->first <= last;) {
      pending_bytes_ -= it->second.size;
      --segments_.at(it->second.segment).pending;
      it = pending_.erase(it);
    }
  }
  // Fully acknowledged segments other than the active one are freed now.
  for (auto it = segments_.begin(); it != segments_.end();) {
    if (std::next(it) != segments_.end() && it->second.pending == 0) {
      auto next = std::next(it);
      release_segment(it);
      it = next;
    } else {
      ++it;
    }
  }
  // The ack log stays as it is, cut to whole entries, unless it grew past the
  // compaction size: opening a spool writes (and syncs) nothing else.
  const fs::path acks = options_.dir / "acks.log";
  std::error_code ec;
  const uint64_t acks_size = fs::exists(acks, ec) ? fs::file_size(acks, ec) : 0;
  if (acks_size > kAckLogCompactBytes) {
    rewrite_acks();
  } else {
    acks_fd_ = ::open(acks.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (acks_fd_ < 0) throw SystemError("spool: cannot open " + acks.string() + ": " + errno_text());
    acks_bytes_ = acks_size / 16 * 16;
    if (::ftruncate(acks_fd_, static_cast<off_t>(acks_bytes_)) != 0) {
      throw SystemError("spool: cannot truncate " + acks.string() + ": " + errno_text());
    }
  }

  // rejected.jsonl has a line per record set aside.
  const fs::path rejected = options_.dir / "rejected.jsonl";
  if (fs::exists(rejected, ec)) {
    const int fd = ::open(rejected.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buf[65536];
      ssize_t r;
      uint64_t off = 0;
      while ((r = ::pread(fd, buf, sizeof buf, static_cast<off_t>(off))) > 0) {
        rejected_ += static_cast<uint64_t>(std::count(buf, buf + r, '\n'));
        off += static_cast<uint64_t>(r);
      }
      ::close(fd);
    }
  }
}

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
  if (acks_fd_ >= 0) ::close(acks_fd_);
  acks_fd_ = -1;
  const fs::path path = options_.dir / "acks.log";
  write_atomically(path, bytes);
  acks_fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (acks_fd_ < 0) throw SystemError("spool: cannot open " + path.string() + ": " + errno_text());
  acks_bytes_ = bytes.size();
}

uint64_t TrajectorySpool::disk_bytes() const {
  uint64_t total = acks_bytes_;
  for (const auto& [first, seg] : segments_) total += seg.bytes;
  return total;
}

uint64_t TrajectorySpool::record_bytes(size_t id_bytes, size_t payload_bytes) {
  return kHeaderBytes + id_bytes + payload_bytes;
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
  seg.fd = ::open(seg.path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (seg.fd < 0) throw SystemError("spool: cannot create " + seg.path.string() + ": " + errno_text());
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
  char header[kHeaderBytes];
  std::memcpy(header, kMagic, 4);
  put_le(header + 4, payload.size(), 4);
  put_le(header + 8, seq, 8);
  put_le(header + 16, id.size(), 2);
  put_le(header + 18, 0, 2);
  put_le(header + 20, record_crc(header, id, payload), 4);
  try {
    // One writev: header, id and payload land together or the tail is torn.
    iovec parts[3] = {{header, kHeaderBytes},
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
      const ssize_t w = ::writev(seg.fd, rest, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) throw SystemError("spool: cannot write " + seg.path.string() + ": " + errno_text());
      done += static_cast<size_t>(w);
    }
    if (options_.fsync && ::fdatasync(seg.fd) != 0) {
      throw SystemError("spool: fdatasync of " + seg.path.string() + " failed: " + errno_text());
    }
  } catch (...) {
    // Leave no partial record behind: the next append starts where this one did.
    if (::ftruncate(seg.fd, static_cast<off_t>(seg.bytes)) != 0) {
      std::fprintf(stderr, "kforge spool: cannot truncate %s after a failed write: %s\n", seg.path.c_str(),
                   errno_text().c_str());
    }
    throw;
  }
  SpoolRecord rec;
  rec.seq = seq;
  rec.id.assign(id);
  rec.segment = seg.first_seq;
  rec.offset = seg.bytes + kHeaderBytes + id.size();
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
  if (!pread_all(seg.fd, payload.data(), payload.size(), it->second.offset)) {
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
  write_all(acks_fd_, bytes.data(), bytes.size(), options_.dir / "acks.log");
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
  if (it->second.fd >= 0) ::close(it->second.fd);
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
  const int fd = ::open(index.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw SystemError("spool: cannot open " + index.string() + ": " + errno_text());
  const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  try {
    write_all(fd, text.data(), text.size(), index);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::fsync(fd);
  ::close(fd);
  ++rejected_;
  acknowledge({seq});
}

}  // namespace kforge::rollout
