#include "kforge/rollout/stream/receiver_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "kforge/core/errno_text.h"
#include "kforge/core/error.h"
#include "kforge/rollout/stream/stream_protocol.h"

namespace kforge::rollout {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHeader = "kforge-receiver-state 1";
// The log is folded into a new snapshot past this size.
constexpr uint64_t kCompactBytes = uint64_t{8} << 20;
// No line we write comes close (ranges are split over lines).
constexpr size_t kMaxLineBytes = size_t{1} << 20;
constexpr size_t kRangesPerLine = 1024;

void write_all(int fd, const std::string& text, const fs::path& path) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw SystemError("receiver state: cannot write " + path.string() + ": " + errno_text());
    done += static_cast<size_t>(w);
  }
}

bool parse_u64(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// Calls fn(line, number) for each complete line; returns the offset after the
// last complete line (a torn tail starts there).
template <typename Fn>
uint64_t for_each_line(const fs::path& path, Fn fn) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return 0;
    throw SystemError("receiver state: cannot open " + path.string() + ": " + errno_text());
  }
  std::string pending;
  uint64_t offset = 0, complete = 0;
  size_t number = 0;
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(fd.get(), buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      throw SystemError("receiver state: cannot read " + path.string() + ": " + errno_text());
    }
    if (r == 0) break;
    size_t start = 0;
    for (size_t i = 0; i < static_cast<size_t>(r); ++i) {
      if (buf[i] != '\n') continue;
      pending.append(buf + start, i - start);
      start = i + 1;
      complete = offset + i + 1;
      fn(pending, ++number);
      pending.clear();
    }
    pending.append(buf + start, static_cast<size_t>(r) - start);
    if (pending.size() > kMaxLineBytes) {
      throw SystemError("receiver state: " + path.string() + " line " + std::to_string(number + 1) +
                        " is longer than " + std::to_string(kMaxLineBytes) + " bytes; the file is damaged");
    }
    offset += static_cast<uint64_t>(r);
  }
  return complete;
}

}  // namespace

void SeqRanges::insert(uint64_t first, uint64_t last) {
  if (first > last) return;
  // Merge with a range that starts before and reaches `first - 1` or beyond.
  auto it = ranges_.upper_bound(first);
  if (it != ranges_.begin()) {
    auto prev = std::prev(it);
    if (prev->second + 1 >= first || prev->second == UINT64_MAX) {
      if (prev->second >= last) return;
      first = prev->first;
      it = ranges_.erase(prev);
    }
  }
  // Absorb ranges that start inside [first, last + 1].
  while (it != ranges_.end() && (last == UINT64_MAX || it->first <= last + 1)) {
    last = std::max(last, it->second);
    it = ranges_.erase(it);
  }
  ranges_.emplace(first, last);
}

bool SeqRanges::contains(uint64_t seq) const {
  auto it = ranges_.upper_bound(seq);
  if (it == ranges_.begin()) return false;
  return std::prev(it)->second >= seq;
}

uint64_t SeqRanges::through() const {
  if (ranges_.empty() || ranges_.begin()->first > 1) return 0;
  return ranges_.begin()->second;
}

ReceiverState::ReceiverState(fs::path dir, bool fsync) : dir_(std::move(dir)), fsync_(fsync) {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw SystemError("receiver state: cannot create " + dir_.string() + ": " + ec.message());
  load();
}

ReceiverState::~ReceiverState() = default;

void ReceiverState::apply_line(const std::string& line, const fs::path& file, size_t line_number) {
  std::istringstream in(line);
  std::string kind, worker;
  in >> kind >> worker;
  auto bad = [&](const std::string& why) {
    return SystemError("receiver state: " + file.string() + ":" + std::to_string(line_number) + ": " + why +
                       "; the file is damaged (move the state directory away to start from nothing, which may "
                       "deliver again what the trainer already acknowledged)");
  };
  if (kind.empty()) return;
  if (!stream::check_worker_id(worker).empty()) throw bad("bad worker id");
  if (kind == "claim") {
    std::string instance, extra;
    in >> instance;
    if (!stream::check_instance(instance).empty() || (in >> extra)) throw bad("bad claim line");
    workers_[worker].instance = instance;
    return;
  }
  if (kind != "ack") throw bad("unknown line kind \"" + kind.substr(0, 32) + "\"");
  std::string a, b;
  Worker& w = workers_[worker];
  while (in >> a) {
    uint64_t first = 0, last = 0;
    if (!(in >> b) || !parse_u64(a, &first) || !parse_u64(b, &last) || first == 0 || first > last) {
      throw bad("bad range");
    }
    w.acked.insert(first, last);
  }
}

void ReceiverState::load() {
  const fs::path snapshot = dir_ / "state.txt";
  bool header_seen = false;
  for_each_line(snapshot, [&](const std::string& line, size_t n) {
    if (n == 1) {
      if (line != kHeader) {
        throw SystemError("receiver state: " + snapshot.string() + " does not start with \"" + kHeader + "\"");
      }
      header_seen = true;
      return;
    }
    apply_line(line, snapshot, n);
  });
  (void)header_seen;
  const fs::path log = dir_ / "acks.log";
  const uint64_t complete = for_each_line(log, [&](const std::string& line, size_t n) { apply_line(line, log, n); });
  log_fd_.reset(::open(log.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (!log_fd_) throw SystemError("receiver state: cannot open " + log.string() + ": " + errno_text());
  // Drop a torn last line so that the next append starts a line of its own.
  if (::ftruncate(log_fd_.get(), static_cast<off_t>(complete)) != 0 ||
      ::lseek(log_fd_.get(), static_cast<off_t>(complete), SEEK_SET) < 0) {
    throw SystemError("receiver state: cannot truncate " + log.string() + ": " + errno_text());
  }
  log_bytes_ = complete;
}

bool ReceiverState::acknowledged(const std::string& worker, uint64_t seq) const {
  auto it = workers_.find(worker);
  return it != workers_.end() && it->second.acked.contains(seq);
}

uint64_t ReceiverState::acked_through(const std::string& worker) const {
  auto it = workers_.find(worker);
  return it == workers_.end() ? 0 : it->second.acked.through();
}

bool ReceiverState::claim(const std::string& worker, const std::string& instance, std::string* known) {
  auto it = workers_.find(worker);
  if (it != workers_.end() && !it->second.instance.empty()) {
    if (it->second.instance == instance) return true;
    if (known) *known = it->second.instance;
    return false;
  }
  if (persistent()) append("claim " + worker + " " + instance + "\n");
  workers_[worker].instance = instance;
  return true;
}

void ReceiverState::acknowledge(const std::map<std::string, std::vector<uint64_t>>& seqs_by_worker) {
  std::string lines;
  for (const auto& [worker, seqs] : seqs_by_worker) {
    const auto ranges = stream::to_ranges(seqs);
    for (size_t i = 0; i < ranges.size(); i += kRangesPerLine) {
      lines += "ack " + worker;
      for (size_t j = i; j < ranges.size() && j < i + kRangesPerLine; ++j) {
        lines += " " + std::to_string(ranges[j].first) + " " + std::to_string(ranges[j].second);
      }
      lines += "\n";
    }
  }
  if (lines.empty()) return;
  if (persistent()) append(lines);
  for (const auto& [worker, seqs] : seqs_by_worker) {
    for (const auto& [first, last] : stream::to_ranges(seqs)) workers_[worker].acked.insert(first, last);
  }
  if (persistent() && log_bytes_ > kCompactBytes) compact();
}

void ReceiverState::append(const std::string& lines) {
  const fs::path log = dir_ / "acks.log";
  write_all(log_fd_.get(), lines, log);
  if (fsync_ && ::fdatasync(log_fd_.get()) != 0) {
    throw SystemError("receiver state: fdatasync of " + log.string() + " failed: " + errno_text());
  }
  log_bytes_ += lines.size();
}

void ReceiverState::compact() {
  std::string text = std::string(kHeader) + "\n";
  for (const auto& [worker, w] : workers_) {
    if (!w.instance.empty()) text += "claim " + worker + " " + w.instance + "\n";
    size_t n = 0;
    for (const auto& [first, last] : w.acked.ranges()) {
      if (n % kRangesPerLine == 0) text += (n == 0 ? "" : "\n") + std::string("ack ") + worker;
      text += " " + std::to_string(first) + " " + std::to_string(last);
      ++n;
    }
    if (n > 0) text += "\n";
  }
  const fs::path snapshot = dir_ / "state.txt";
  const fs::path tmp = dir_ / "state.txt.tmp";
  {
    const UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) throw SystemError("receiver state: cannot create " + tmp.string() + ": " + errno_text());
    write_all(fd.get(), text, tmp);
    ::fsync(fd.get());
  }
  if (::rename(tmp.c_str(), snapshot.c_str()) != 0) {
    throw SystemError("receiver state: cannot replace " + snapshot.string() + ": " + errno_text());
  }
  // The snapshot now holds everything: the log starts over. A kill between
  // the rename and the truncation replays lines the snapshot already has,
  // which changes nothing.
  if (::ftruncate(log_fd_.get(), 0) != 0 || ::lseek(log_fd_.get(), 0, SEEK_SET) < 0) {
    throw SystemError("receiver state: cannot truncate the ack log: " + errno_text());
  }
  log_bytes_ = 0;
}

}  // namespace kforge::rollout
