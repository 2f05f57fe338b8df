#include "kforge/rollout/stream/trajectory_file_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "kforge/core/document.h"
#include "kforge/core/error.h"
#include "kforge/core/unique_fd.h"

namespace kforge::rollout {
namespace {

namespace fs = std::filesystem;

void write_all(int fd, const std::string& text, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw SystemError("receive: cannot write " + path + ": " + std::strerror(errno));
    done += static_cast<size_t>(w);
  }
}

struct Tail {
  uint64_t lines = 0;  // whole lines past the checkpoint
  uint64_t size = 0;   // the file's size once a torn last line is cut
  bool torn = false;   // a torn last line was cut
};

Tail recover_tail(int fd, const std::string& path, uint64_t from) {
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < 0) throw SystemError("receive: cannot read " + path);
  if (static_cast<uint64_t>(size) < from) {
    throw InputError("receive: " + path + " is shorter (" + std::to_string(size) + " bytes) than the " +
                     std::to_string(from) +
                     " bytes this receiver wrote to it: it was truncated or replaced. Use a new --out and --state");
  }
  std::string tail(static_cast<size_t>(size) - from, '\0');
  size_t got = 0;
  while (got < tail.size()) {
    const ssize_t r = ::pread(fd, tail.data() + got, tail.size() - got, static_cast<off_t>(from + got));
    if (r <= 0) throw SystemError("receive: cannot read " + path);
    got += static_cast<size_t>(r);
  }
  const size_t last_newline = tail.rfind('\n');
  const size_t whole = last_newline == std::string::npos ? 0 : last_newline + 1;
  const bool torn = whole < tail.size();
  if (torn && ::ftruncate(fd, static_cast<off_t>(from + whole)) != 0) {
    throw SystemError("receive: cannot truncate " + path);
  }
  return {static_cast<uint64_t>(std::count(tail.begin(), tail.begin() + static_cast<std::ptrdiff_t>(whole), '\n')),
          from + whole, torn};
}

}  // namespace

FileStoreCheckpoint TrajectoryFileStore::load_checkpoint(const fs::path& file, const std::string& out) {
  FileStoreCheckpoint c;
  c.out = out;
  std::error_code ec;
  if (!fs::exists(file, ec)) return c;
  const Document doc = Document::from_file(file);
  ObjectReader r = doc.root_object();
  const std::string recorded = r.required("out").as_string();
  c.committed_bytes = static_cast<uint64_t>(r.required("committed_bytes").as_int());
  c.records = static_cast<uint64_t>(r.required("records").as_int());
  for (const Field& k : r.required("writing").as_array()) {
    const json& v = k.value();
    if (!v.is_array() || v.size() != 2 || !v[0].is_string() || !v[1].is_number_unsigned()) k.fail("[worker, seq]");
    c.writing.push_back({v[0].get<std::string>(), v[1].get<uint64_t>()});
  }
  r.finish();
  if (recorded != out) {
    throw InputError("receive: the state " + file.parent_path().string() + " belongs to the output " + recorded +
                     ", not " + out + "; give each output its own --state");
  }
  return c;
}

TrajectoryFileStore::TrajectoryFileStore(const fs::path& out_path, const fs::path& state_dir, bool fsync)
    : checkpoint_file_(state_dir / "receive-out.json"), fsync_(fsync) {
  const std::string out = fs::absolute(out_path).lexically_normal().string();
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  if (ec) throw InputError("receive: cannot create the state directory " + state_dir.string() + ": " + ec.message());
  if (fs::path(out).has_parent_path()) fs::create_directories(fs::path(out).parent_path(), ec);
  checkpoint_ = load_checkpoint(checkpoint_file_, out);

  // A member: closed also when the checks below throw out of the constructor.
  fd_.reset(::open(out.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd_) throw InputError("receive: cannot open " + out + ": " + std::strerror(errno));
  const Tail tail = recover_tail(fd_.get(), out, checkpoint_.committed_bytes);
  if (tail.lines > checkpoint_.writing.size()) {
    throw InputError("receive: " + out + " has " + std::to_string(tail.lines) +
                     " lines past what this receiver checkpointed; something else wrote to it. Use a new --out "
                     "and --state");
  }
  recovered_.assign(checkpoint_.writing.begin(), checkpoint_.writing.begin() + static_cast<std::ptrdiff_t>(tail.lines));
  recovered_size_ = tail.size;
  dropped_torn_line_ = tail.torn;
}

TrajectoryFileStore::~TrajectoryFileStore() = default;

void TrajectoryFileStore::finish_recovery(const AcknowledgeFn& acknowledge_stored) {
  if (recovery_finished_) throw std::logic_error("TrajectoryFileStore::finish_recovery called twice");
  // Acknowledged before the checkpoint forgets their keys: killed in
  // between, the next open recovers the same lines again.
  acknowledge_stored(recovered_);
  checkpoint_.committed_bytes = recovered_size_;
  checkpoint_.records += recovered_.size();
  checkpoint_.writing.clear();
  save_checkpoint();
  recovery_finished_ = true;
}

void TrajectoryFileStore::append(const std::vector<Delivery>& batch, const AcknowledgeFn& acknowledge) {
  if (!recovery_finished_) throw std::logic_error("TrajectoryFileStore::append before finish_recovery");
  if (batch.empty()) return;
  std::string text;
  std::vector<DeliveryKey> keys;
  keys.reserve(batch.size());
  for (const auto& d : batch) {
    text += d.trajectory().dump(-1, ' ', false, json::error_handler_t::replace);
    text += '\n';
    keys.push_back(d.key());
  }
  checkpoint_.writing = keys;
  save_checkpoint();                            // (1) what is about to be written
  write_all(fd_.get(), text, checkpoint_.out);  // (2)
  if (fsync_ && ::fdatasync(fd_.get()) != 0) throw SystemError("receive: fdatasync of " + checkpoint_.out + " failed");
  acknowledge(keys);  // (3)
  checkpoint_.committed_bytes += text.size();
  checkpoint_.records += batch.size();
  checkpoint_.writing.clear();
  save_checkpoint();  // (4)
}

void TrajectoryFileStore::save_checkpoint() const {
  json writing = json::array();
  for (const auto& k : checkpoint_.writing) writing.push_back({k.worker, k.seq});
  const json doc = {{"out", checkpoint_.out},
                    {"committed_bytes", checkpoint_.committed_bytes},
                    {"records", checkpoint_.records},
                    {"writing", writing}};
  const std::string text = doc.dump() + "\n";
  const fs::path tmp = checkpoint_file_.string() + ".tmp";
  {
    const UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) throw SystemError("receive: cannot write " + tmp.string() + ": " + std::strerror(errno));
    write_all(fd.get(), text, tmp.string());
    if (fsync_) ::fsync(fd.get());
  }
  if (::rename(tmp.c_str(), checkpoint_file_.c_str()) != 0) {
    throw SystemError("receive: cannot replace " + checkpoint_file_.string() + ": " + std::strerror(errno));
  }
}

}  // namespace kforge::rollout
