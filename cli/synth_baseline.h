// The baselines `kforge synth` records: eager baselines measured by the judge
// ("time the reference": the clock, cache flush and stopping rule of the
// speedup denominator), and torch.compile baselines from parallel Python
// processes where a working torch.compile exists.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "kforge/data_synth/synthesizer.h"

namespace kforge::cli {

class SynthBaselines {
 public:
  explicit SynthBaselines(const std::string& backend);
  ~SynthBaselines();
  // Thread-safe: requests queue at the device's judge.
  synth::BaselineResult measure(const TaskSpec& task);
  std::string device();
  std::string describe() const;  // the timing options, for the log line

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Runs data_synth/python/compile_baselines.py over the run's tasks (those
// without a compile baseline) and merges the results into tasks.jsonl
// (rewritten atomically). Returns a one-line note (how many, or why none).
// With `required`, a PyTorch without a working torch.compile is an error.
std::string add_compile_baselines(const std::filesystem::path& out, const std::string& python,
                                  const std::filesystem::path& script, const std::string& backend, int workers,
                                  bool required);

}  // namespace kforge::cli
