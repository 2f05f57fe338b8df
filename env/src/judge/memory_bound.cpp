#include "judge/memory_bound.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

namespace kforge::judge {
namespace {

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::string MemoryBound::after_request(JudgeDevice* device) {
  uint64_t rss = resident_bytes();
  peak_rss_ = std::max(peak_rss_, rss);
  // A judge about to retire trims first whatever it grew: the trim may keep it.
  const bool grew_since_trim = !rss_after_trim_ || rss > *rss_after_trim_ + kTrimAgainAfterGrowthBytes;
  if (rss > limits_.trim_above_bytes && (grew_since_trim || rss > limits_.retire_above_bytes)) {
    ::malloc_trim(0);
    ++trims_;
    rss = resident_bytes();
    rss_after_trim_ = rss;
  }
  if (rss > limits_.retire_above_bytes) {
    return "the judge holds " + mib(rss) + " of memory after trimming (the limit is " +
           mib(limits_.retire_above_bytes) + ")";
  }
  uint64_t in_use = device->device_memory_in_use();
  if (in_use > 0) {
    if (!device_baseline_) device_baseline_ = in_use;
    if (in_use > *device_baseline_ + limits_.device_trim_above_bytes && device->release_cached_memory()) {
      ++device_releases_;
      in_use = device->device_memory_in_use();
    }
    device_in_use_ = in_use;
  }
  return "";
}

nlohmann::json MemoryBound::to_json() const {
  nlohmann::json j = {{"rss_bytes", resident_bytes()},
                      {"peak_rss_bytes", std::max(peak_rss_, resident_bytes())},
                      {"trims", trims_},
                      {"trim_above_bytes", limits_.trim_above_bytes},
                      {"retire_above_bytes", limits_.retire_above_bytes}};
  if (device_baseline_) {
    j["device_in_use_bytes"] = device_in_use_;
    j["device_baseline_bytes"] = *device_baseline_;
    j["device_releases"] = device_releases_;
  }
  return j;
}

}  // namespace kforge::judge
