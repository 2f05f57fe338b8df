// The baselines `kforge synth` records: eager baselines measured by the judge
// ("time the reference": the clock, cache flush and stopping rule of the
// speedup denominator), and torch.compile baselines from parallel Python
// processes where a working torch.compile exists.
#pragma once

#include <cstdint>
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

struct CompileBaselineOptions {
  std::string python;            // an interpreter whose torch has torch.compile
  std::filesystem::path script;  // data_synth/python/compile_baselines.py
  std::string backend = "cpu";   // cpu | cuda
  int workers = 0;               // compile processes; 0: one per core
  int64_t sample = 0;            // at most this many tasks still without one (0: all)
  double time_limit_s = 0;       // start no new compile after this long (0: no limit)
  bool required = false;         // a PyTorch without a working torch.compile is an error
};

// Runs data_synth/python/compile_baselines.py over the run's tasks that have
// none yet (their KernelBench renderings under out/kernelbench must exist)
// and merges every result into tasks.jsonl, rewritten atomically:
// baselines.compile_ms and meta.compile_baseline {device, torch, protocol,
// samples} or {error}. Returns a one-line note (how many, or why none).
std::string add_compile_baselines(const std::filesystem::path& out, const CompileBaselineOptions& options);

}  // namespace kforge::cli
