// One call of kf_forward under CUPTI activity tracing, for a `profile`
// request (a profiler runner, or a tracing timing runner after its timing):
// what the call put on the GPU, with the timestamps the judge's kernel
// attribution reads (judge/kernel_attribution.h) to see work outside the
// candidate's stream and work still running once the stream was
// synchronized (after the call, as the harness sees it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>

namespace kforge::runner {

// Records kept of one traced call; the rest are counted as `dropped`.
inline constexpr size_t kMaxTraceRecords = 512;

// The candidate's stream, the runner's two events on it, and CUPTI's id of
// the stream (as the records carry it).
struct TracedStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  uint32_t cupti_id = 0;
};

// Calls `forward` once with tracing already started (ActivityTrace::start),
// stops it and returns {"rc", "stream", "call_start_ns", "synchronized_ns",
// "device_ns", "records", "dropped"}. Throws DeviceError for a fault the
// call caused.
nlohmann::json trace_started_call(const std::function<int()>& forward, const TracedStream& s);

}  // namespace kforge::runner
