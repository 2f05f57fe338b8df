#include "runner/cuda_call_trace.h"

#include <vector>

#include "cupti/activity_trace.h"
#include "runner/cuda_errors.h"
#include "runner/runner_device.h"

namespace kforge::runner {

nlohmann::json trace_started_call(const std::function<int()>& forward, const TracedStream& s) {
  uint64_t call_start = cupti::ActivityTrace::timestamp();
  check(cudaEventRecord(s.start, s.stream), "cudaEventRecord");
  int rc = forward();
  cudaError_t recorded = cudaEventRecord(s.stop, s.stream);
  cudaError_t synced = cudaStreamSynchronize(s.stream);
  uint64_t returned = cupti::ActivityTrace::timestamp();
  cudaError_t drained = cudaDeviceSynchronize();
  size_t dropped = 0;
  std::vector<cupti::ActivityRecord> records = cupti::ActivityTrace::stop(kMaxTraceRecords, &dropped);
  for (cudaError_t e : {synced, recorded, drained}) {
    if (e != cudaSuccess) throw DeviceError(fault_text(e, rc));
  }
  float ms = 0;
  cudaEventElapsedTime(&ms, s.start, s.stop);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : records) list.push_back(r.to_json());
  return {{"rc", rc},
          {"stream", s.cupti_id},
          {"call_start_ns", call_start},
          {"synchronized_ns", returned},
          {"device_ns", static_cast<uint64_t>(static_cast<double>(ms) * 1e6)},
          {"records", list},
          {"dropped", dropped}};
}

}  // namespace kforge::runner
