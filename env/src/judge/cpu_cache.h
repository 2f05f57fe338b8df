// The CPU's last-level cache, and evicting it between timed samples (the CPU
// counterpart of docs/architecture.md#timing's L2 flush).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kforge::judge {

struct CacheSize {
  uint64_t bytes = 0;
  std::string source;  // "sysfs", "sysconf" or "default"
};

// Largest level-3 cache from /sys/devices/system/cpu/cpu0/cache/index*/, then
// sysconf(_SC_LEVEL3_CACHE_SIZE), then 32 MiB; clamped to 128 MiB, the most a
// single core reaches on current CPUs.
CacheSize detect_last_level_cache();

// Writes a buffer of twice the cache size: the write pass replaces every line
// of an inclusive or exclusive LLC with our own, dirtied data.
class CacheFlusher {
 public:
  explicit CacheFlusher(uint64_t cache_bytes);
  void flush();
  uint64_t bytes() const { return buffer_.size(); }
  // Best-of-`runs` memcpy bandwidth between the two halves of the buffer
  // (at most kCopyBytes each), counting bytes read plus bytes written, on the
  // calling thread's CPU clock: time the thread spends descheduled on a busy
  // machine does not count, as it does not for candidates (timing.h).
  double measure_copy_bandwidth(int runs);
  static constexpr uint64_t kCopyBytes = 32ull << 20;

 private:
  std::vector<unsigned char> buffer_;
  unsigned char round_ = 0;
};

}  // namespace kforge::judge
