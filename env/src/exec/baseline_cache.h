// Timed references (baselines) kept on disk (docs/execution.md, "Baseline
// cache"). A baseline depends on the task's content, the timing options, the
// GPU model (or CPU model) and the software it ran on, so the key is the
// SHA-256 of all of them: a new driver, PyTorch or kforge version, or another
// kind of device, is simply a miss. One JSON file per entry, written to a
// temporary name and renamed into place, so a reader never sees half an entry
// and concurrent writers of the same key leave one of two equal files.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "kforge/env/reference_probe.h"

namespace kforge::exec {

class BaselineCache {
 public:
  // Creates the directory. Throws SystemError if it cannot.
  explicit BaselineCache(std::filesystem::path dir);

  // The key of a timed reference request run on a device named `device`
  // whose judge reported `versions` (JudgeDevice::versions()).
  static std::string key(const env::ReferenceRequest& request, const std::string& device, const json& versions);
  // A stored report with status ok and a timing, or nothing (absent,
  // unreadable or for another key: a cache never fails a request).
  std::optional<env::ReferenceReport> load(const std::string& key) const;
  // Stores an ok, timed report; anything else is ignored. Failures to write
  // are ignored too (the next request measures again).
  void store(const std::string& key, const env::ReferenceReport& report) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace kforge::exec
