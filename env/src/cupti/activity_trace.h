// CUPTI Activity tracing in the runner's profiler process (docs/architecture.md#timing):
// which kernels, copies and memsets one call of kf_forward put on the GPU, on
// which streams, and when they ran. The judge turns the records into kernel
// attribution (judge/kernel_attribution.h).
//
// CUPTI starts worker threads and opens device files when tracing is first
// enabled, which the runner's sandbox does not allow once candidate code is
// loaded; initialize() therefore runs at runner start-up and enables and
// disables tracing once, so that start()/stop() later need no new threads.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kforge::cupti {

struct ActivityRecord {
  std::string kind;  // "kernel", "memcpy", "memset"
  std::string name;  // mangled kernel name; "" for copies and memsets
  uint32_t stream = 0;
  uint64_t start_ns = 0, end_ns = 0;  // CUPTI timestamps (cuptiGetTimestamp's clock)
  int32_t grid[3] = {0, 0, 0};
  int32_t block[3] = {0, 0, 0};
  int32_t registers = 0;
  int32_t static_shared_bytes = 0;
  int32_t dynamic_shared_bytes = 0;
  uint64_t bytes = 0;  // copies and memsets
  nlohmann::json to_json() const;
};

class ActivityTrace {
 public:
  // "" when tracing works, else why not. Idempotent.
  static std::string initialize();
  // Starts recording kernel, memcpy and memset activity.
  static std::string start();
  // Stops, flushes and returns what was recorded since start(), keeping at
  // most `max_records` (`dropped` counts the rest, ours and CUPTI's).
  static std::vector<ActivityRecord> stop(size_t max_records, size_t* dropped);
  // CUPTI's clock, comparable with the records' timestamps.
  static uint64_t timestamp();
  // CUPTI's id of `stream`, as the records' stream field carries it.
  static std::optional<uint32_t> stream_id(cudaStream_t stream);
};

// "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES", ... for a CUPTI result code.
std::string cupti_result_name(int result);

}  // namespace kforge::cupti
