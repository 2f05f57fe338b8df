#include "judge/gpu_gate.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "ipc/deadline.h"
#include "kforge/core/elapsed.h"
#include "kforge/core/errno_text.h"
#include "kforge/core/error.h"

namespace kforge::judge {
namespace {

UniqueFd open_lock_file(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  if (!fd) throw SystemError("GPU gate: cannot open " + path.string() + ": " + errno_text(errno));
  // Another user's judge must be able to lock it too, whatever our umask.
  struct stat st {};
  if (::fstat(fd.get(), &st) == 0 && st.st_uid == ::geteuid() && (st.st_mode & 0666) != 0666) {
    ::fchmod(fd.get(), 0666);
  }
  return fd;
}

// flock, retried when a signal interrupts it. No timeout: a holder is a judge
// whose own request deadline bounds it, and whose death releases it.
void lock_blocking(const UniqueFd& fd, int operation, const char* what) {
  while (::flock(fd.get(), operation) != 0) {
    if (errno != EINTR) throw SystemError(std::string("GPU gate: flock (") + what + "): " + errno_text(errno));
  }
}

// Calls `notice` every `every_ms` on its own thread until destroyed, the
// blocking flock going on in the thread that made it.
class WaitNotifier {
 public:
  WaitNotifier(const std::function<void(double)>& notice, double every_ms) : notice_(notice), every_ms_(every_ms) {
    thread_ = std::thread([this] { run(); });
  }
  ~WaitNotifier() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  WaitNotifier(const WaitNotifier&) = delete;
  WaitNotifier& operator=(const WaitNotifier&) = delete;

 private:
  void run() {
    auto last = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::duration<double, std::milli>(every_ms_), [this] { return done_; })) {
      const auto now = std::chrono::steady_clock::now();
      notice_(elapsed_ms(last, now));
      last = now;
    }
  }

  const std::function<void(double)>& notice_;
  const double every_ms_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

void GpuGate::lock(const UniqueFd& fd, int operation, const char* what) {
  if (!notice_) return lock_blocking(fd, operation, what);
  // Free at once (the common case): no thread.
  if (::flock(fd.get(), operation | LOCK_NB) == 0) return;
  if (errno != EWOULDBLOCK && errno != EINTR) {
    throw SystemError(std::string("GPU gate: flock (") + what + "): " + errno_text(errno));
  }
  WaitNotifier notifier(notice_, notice_every_ms_);
  lock_blocking(fd, operation, what);
}

void GpuGate::set_wait_notice(std::function<void(double waited_ms)> notice, double every_ms) {
  notice_ = std::move(notice);
  notice_every_ms_ = every_ms;
}

GpuGate::GpuGate(const std::filesystem::path& dir, const std::string& key) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) throw SystemError("GPU gate: cannot create " + dir.string() + ": " + ec.message());
    ::chmod(dir.c_str(), 01777);
  }
  const std::string name = file_key(key);
  intent_ = open_lock_file(dir / (name + ".intent"));
  gpu_ = open_lock_file(dir / (name + ".gpu"));
}

std::string GpuGate::file_key(const std::string& key) {
  std::string out = key.empty() ? std::string("gpu") : key;
  for (char& c : out) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return out;
}

double GpuGate::shared() {
  if (!enabled() || hold_ == Hold::kShared) return 0;
  const auto start = std::chrono::steady_clock::now();
  if (hold_ == Hold::kExclusive) {
    // We hold the turnstile, so no one else can be waiting for the lock:
    // converting it (which flock does by unlocking first) lets no writer in.
    lock(gpu_, LOCK_SH, "downgrade");
    lock(intent_, LOCK_UN, "turnstile release");
  } else {
    lock(intent_, LOCK_SH, "turnstile");
    try {
      lock(gpu_, LOCK_SH, "share");
    } catch (...) {
      ::flock(intent_.get(), LOCK_UN);
      throw;
    }
    lock(intent_, LOCK_UN, "turnstile release");
  }
  hold_ = Hold::kShared;
  return ms_since(start);
}

double GpuGate::exclusive() {
  if (!enabled() || hold_ == Hold::kExclusive) return 0;
  const auto start = std::chrono::steady_clock::now();
  release();
  lock(intent_, LOCK_EX, "turnstile");
  try {
    lock(gpu_, LOCK_EX, "exclusive");
  } catch (...) {
    ::flock(intent_.get(), LOCK_UN);
    throw;
  }
  hold_ = Hold::kExclusive;
  return ms_since(start);
}

void GpuGate::release() {
  if (!enabled() || hold_ == Hold::kNone) return;
  ::flock(gpu_.get(), LOCK_UN);
  if (hold_ == Hold::kExclusive) ::flock(intent_.get(), LOCK_UN);
  hold_ = Hold::kNone;
}

}  // namespace kforge::judge
