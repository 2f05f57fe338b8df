// Hardware metrics of one kf_forward call through the CUPTI range profiler
// (docs/architecture.md#timing): SM and memory throughput as % of peak, DRAM bytes, achieved
// occupancy, the duration and the SM clock. One user range around the whole
// call, replayed by calling kf_forward again once per pass (its outputs are
// rewritten from the same inputs, so replays are harmless).
//
// Set-up (profiler, metric configuration, counter image, the range profiler
// enabled on the context) happens at runner start-up: it loads libraries,
// allocates pinned buffers and may need privileges, none of which the sandbox
// allows later. Counters may still be refused at collection time (the driver
// restricts them to administrators by default, and the sandboxed runner drops
// every capability; a VM may hide them): collect() then says why.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace kforge::cupti {

// The metrics asked for, most useful first; those the chip does not support
// are skipped and listed in the result.
const std::vector<std::string>& default_metric_names();

class RangeMetrics {
 public:
  // Needs a current CUDA context on `device`. Never throws: a failed set-up
  // leaves the object unavailable with the reason.
  RangeMetrics(int device, const std::vector<std::string>& metrics);
  ~RangeMetrics();
  RangeMetrics(const RangeMetrics&) = delete;
  RangeMetrics& operator=(const RangeMetrics&) = delete;

  bool available() const { return error_.empty(); }
  const std::string& why_unavailable() const { return error_; }
  // How long each step of the set-up took (initialize, host, metrics,
  // config_image, enable), in ms: where a profiler runner's start-up goes.
  const std::vector<std::pair<const char*, double>>& setup_phases_ms() const { return setup_phases_ms_; }

  // Runs `before_pass` (outside the range: the L2 flush) then `run_once` (one
  // call, synchronized) once per replay pass. Returns {"values": {metric:
  // value}, "passes", "unsupported": [...]}. Throws std::runtime_error with the
  // reason when counters cannot be collected. Usable once per set-up.
  nlohmann::json collect(const std::function<void()>& before_pass, const std::function<void()>& run_once);

  struct State;

 private:
  std::unique_ptr<State> state_;
  std::string error_;
  std::vector<std::pair<const char*, double>> setup_phases_ms_;
};

}  // namespace kforge::cupti
