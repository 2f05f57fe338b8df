#include "cupti/activity_trace.h"

#include <cupti.h>

#include <cstdlib>
#include <mutex>

namespace kforge::cupti {
namespace {

constexpr size_t kBufferBytes = 1 << 20;
constexpr size_t kAlign = 8;
const CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                     CUPTI_ACTIVITY_KIND_MEMSET};

// Completed buffers may be handed over on CUPTI's own thread.
std::mutex g_mutex;
std::vector<ActivityRecord> g_records;
size_t g_dropped = 0;
size_t g_limit = 4096;
bool g_initialized = false;
std::string g_init_error;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

ActivityRecord from_kernel(const CUpti_ActivityKernel10& k) {
  ActivityRecord r;
  r.kind = "kernel";
  r.name = k.name != nullptr ? k.name : "";
  r.stream = k.streamId;
  r.start_ns = k.start;
  r.end_ns = k.end;
  r.grid[0] = k.gridX;
  r.grid[1] = k.gridY;
  r.grid[2] = k.gridZ;
  r.block[0] = k.blockX;
  r.block[1] = k.blockY;
  r.block[2] = k.blockZ;
  r.registers = k.registersPerThread;
  r.static_shared_bytes = k.staticSharedMemory;
  r.dynamic_shared_bytes = k.dynamicSharedMemory;
  return r;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  std::lock_guard<std::mutex> lock(g_mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    ActivityRecord r;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        r = from_kernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        r.kind = "memcpy";
        r.stream = m.streamId;
        r.start_ns = m.start;
        r.end_ns = m.end;
        r.bytes = m.bytes;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        r.kind = "memset";
        r.stream = m.streamId;
        r.start_ns = m.start;
        r.end_ns = m.end;
        r.bytes = m.bytes;
        break;
      }
      default:
        continue;
    }
    if (g_records.size() < g_limit) {
      g_records.push_back(std::move(r));
    } else {
      ++g_dropped;
    }
  }
  std::free(buffer);
}

std::string describe(const char* what, CUptiResult r) { return std::string(what) + ": " + cupti_result_name(r); }

}  // namespace

std::string cupti_result_name(int result) {
  const char* s = nullptr;
  if (cuptiGetResultString(static_cast<CUptiResult>(result), &s) == CUPTI_SUCCESS && s != nullptr) return s;
  return "CUPTI error " + std::to_string(result);
}

nlohmann::json ActivityRecord::to_json() const {
  nlohmann::json j = {{"kind", kind}, {"stream", stream}, {"start_ns", start_ns}, {"end_ns", end_ns}};
  if (kind == "kernel") {
    j["name"] = name;
    j["grid"] = {grid[0], grid[1], grid[2]};
    j["block"] = {block[0], block[1], block[2]};
    j["registers"] = registers;
    j["static_shared_bytes"] = static_shared_bytes;
    j["dynamic_shared_bytes"] = dynamic_shared_bytes;
  } else {
    j["bytes"] = bytes;
  }
  return j;
}

std::string ActivityTrace::initialize() {
  if (g_initialized) return g_init_error;
  g_initialized = true;
  if (CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS) {
    g_init_error = describe("cuptiActivityRegisterCallbacks", r);
    return g_init_error;
  }
  if (std::string e = start(); !e.empty()) {
    g_init_error = e;
    return g_init_error;
  }
  size_t dropped = 0;
  stop(0, &dropped);
  return g_init_error;
}

std::string ActivityTrace::start() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records.clear();
    g_dropped = 0;
  }
  for (CUpti_ActivityKind kind : kKinds) {
    if (CUptiResult r = cuptiActivityEnable(kind); r != CUPTI_SUCCESS) return describe("cuptiActivityEnable", r);
  }
  return "";
}

std::vector<ActivityRecord> ActivityTrace::stop(size_t max_records, size_t* dropped) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_limit = max_records;
  }
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
  std::lock_guard<std::mutex> lock(g_mutex);
  *dropped = g_dropped;
  g_limit = 4096;
  return std::move(g_records);
}

uint64_t ActivityTrace::timestamp() {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

std::optional<uint32_t> ActivityTrace::stream_id(cudaStream_t stream) {
  uint32_t id = 0;
  if (cuptiGetStreamIdEx(nullptr, reinterpret_cast<CUstream>(stream), 0, &id) != CUPTI_SUCCESS) return std::nullopt;
  return id;
}

}  // namespace kforge::cupti
