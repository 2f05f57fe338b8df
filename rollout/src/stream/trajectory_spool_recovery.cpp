// Opening a spool left on disk: its description, its segments scanned and
// checked record by record (an interrupted append at the tail is cut off),
// and the ack log and the set-aside index read back.
#include <fcntl.h>
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
#include "kforge/rollout/stream/trajectory_spool.h"
#include "spool_file_io.h"
#include "spool_format.h"

namespace kforge::rollout {

namespace fs = std::filesystem;
using json = nlohmann::json;
using internal::get_le;
using internal::kAckLogCompactBytes;
using internal::kSpoolFormat;
using internal::kSpoolHeaderBytes;
using internal::kSpoolMagic;
using internal::parse_segment_name;
using internal::pread_all;
using internal::random_instance;
using internal::record_crc;
using internal::write_atomically;

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
    const json doc = {{"format", kSpoolFormat}, {"worker", options_.worker_id}, {"instance", instance_}};
    write_atomically(meta, doc.dump() + "\n");
    return;
  }
  const uint64_t size = fs::file_size(meta, ec);
  if (ec || size > 65536) throw SystemError("spool: " + meta.string() + " is unreadable or too large");
  std::string text(size, '\0');
  const UniqueFd fd(::open(meta.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw SystemError("spool: cannot open " + meta.string() + ": " + errno_text());
  const bool ok = pread_all(fd.get(), text.data(), text.size(), 0);
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!ok || !doc.is_object() || doc.value("format", 0) != kSpoolFormat || !doc.contains("worker") ||
      !doc["worker"].is_string() || !doc.contains("instance") || !doc["instance"].is_string()) {
    throw SystemError("spool: " + meta.string() + " is not a spool description of format " +
                      std::to_string(kSpoolFormat) + "; move the directory away and start again");
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
    char header[kSpoolHeaderBytes];
    std::string problem;
    uint32_t payload_len = 0;
    uint64_t seq = 0;
    uint16_t id_len = 0;
    if (file_size - offset < kSpoolHeaderBytes || !pread_all(seg.fd.get(), header, kSpoolHeaderBytes, offset)) {
      problem = "a record header is cut short";
    } else if (std::memcmp(header, kSpoolMagic, 4) != 0) {
      problem = "no record starts here";
    } else {
      payload_len = static_cast<uint32_t>(get_le(header + 4, 4));
      seq = get_le(header + 8, 8);
      id_len = static_cast<uint16_t>(get_le(header + 16, 2));
      const uint64_t body_len = uint64_t{id_len} + payload_len;
      if (file_size - offset - kSpoolHeaderBytes < body_len) {
        problem = "a record is cut short";
      } else {
        body.resize(body_len);
        pread_all(seg.fd.get(), body.data(), body.size(), offset + kSpoolHeaderBytes);
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
      if (::ftruncate(seg.fd.get(), static_cast<off_t>(offset)) != 0) {
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
    rec.offset = offset + kSpoolHeaderBytes + id_len;
    rec.size = payload_len;
    pending_.emplace(seq, std::move(rec));
    pending_bytes_ += payload_len;
    ++seg.pending;
    seg.last_seq = seq;
    offset += kSpoolHeaderBytes + id_len + payload_len;
  }
  seg.bytes = offset;
}

void TrajectorySpool::load_acks(std::vector<std::pair<uint64_t, uint64_t>>* ranges) const {
  const fs::path path = options_.dir / "acks.log";
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return;
  char buf[16 * 4096];
  uint64_t offset = 0;
  for (;;) {
    const ssize_t r = ::pread(fd.get(), buf, sizeof buf, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    // A torn last entry (fewer than 16 bytes) was an ack not yet recorded.
    const size_t whole = static_cast<size_t>(r) / 16 * 16;
    for (size_t i = 0; i < whole; i += 16) ranges->emplace_back(get_le(buf + i, 8), get_le(buf + i + 8, 8));
    offset += whole;
    if (whole < static_cast<size_t>(r) || whole == 0) break;
  }
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
    seg.fd.reset(::open(seg.path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC));
    if (!seg.fd) throw SystemError("spool: cannot open " + seg.path.string() + ": " + errno_text());
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
    acks_fd_.reset(::open(acks.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!acks_fd_) throw SystemError("spool: cannot open " + acks.string() + ": " + errno_text());
    acks_bytes_ = acks_size / 16 * 16;
    if (::ftruncate(acks_fd_.get(), static_cast<off_t>(acks_bytes_)) != 0) {
      throw SystemError("spool: cannot truncate " + acks.string() + ": " + errno_text());
    }
  }

  // rejected.jsonl has a line per record set aside.
  const fs::path rejected = options_.dir / "rejected.jsonl";
  if (fs::exists(rejected, ec)) {
    const UniqueFd fd(::open(rejected.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd) {
      char buf[65536];
      ssize_t r;
      uint64_t off = 0;
      while ((r = ::pread(fd.get(), buf, sizeof buf, static_cast<off_t>(off))) > 0) {
        rejected_ += static_cast<uint64_t>(std::count(buf, buf + r, '\n'));
        off += static_cast<uint64_t>(r);
      }
    }
  }
}

}  // namespace kforge::rollout
