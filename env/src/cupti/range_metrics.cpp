#include "cupti/range_metrics.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>

#include "cupti/activity_trace.h"

namespace kforge::cupti {
namespace {

constexpr size_t kMaxPasses = 64;
constexpr const char* kRangeName = "kf_forward";

// CUPTI's parameter structs: zeroed, with their size set (the versioning
// convention of the profiler API).
template <typename T>
T params(size_t struct_size) {
  T p{};
  p.structSize = struct_size;
  return p;
}

std::string describe(const char* what, CUptiResult r) {
  std::string s = std::string(what) + ": " + cupti_result_name(r);
  if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
    s += " (the driver restricts GPU performance counters to administrators, "
         "NVreg_RestrictProfilingToAdminUsers=1, and the sandboxed runner holds no capabilities)";
  } else if (r == CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED) {
    s += " (performance counters are not exposed in this virtual machine)";
  }
  return s;
}

// The runtime's current context as a driver handle. Through the runtime's
// entry-point query rather than by linking libcuda: a runner built here must
// still start on machines without the driver (CPU backend, CI).
CUcontext current_context() {
  using GetCurrent = CUresult (*)(CUcontext*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || fn == nullptr) {
    return nullptr;
  }
  CUcontext ctx = nullptr;
  return reinterpret_cast<GetCurrent>(fn)(&ctx) == CUDA_SUCCESS ? ctx : nullptr;
}

}  // namespace

const std::vector<std::string>& default_metric_names() {
  static const std::vector<std::string> kNames = {
      "gpu__time_duration.sum",
      "sm__throughput.avg.pct_of_peak_sustained_elapsed",
      "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
      "dram__throughput.avg.pct_of_peak_sustained_elapsed",
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
      "sm__warps_active.avg.pct_of_peak_sustained_active",
      "sm__cycles_elapsed.avg.per_second",
      // The share of the range in which some SM had work: what restates the
      // throughputs over the kernels' time (judge/profile.h).
      "sm__cycles_active.max",
      "sm__cycles_elapsed.max",
  };
  return kNames;
}

struct RangeMetrics::State {
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* profiler = nullptr;
  bool profiler_initialized = false;
  std::vector<std::string> metrics;  // supported, in order
  std::vector<std::string> unsupported;
  std::vector<const char*> metric_ptrs;
  std::vector<uint8_t> availability, config, counter_data;
  size_t passes = 0;
  bool used = false;

  // The setup's phases, in order; each returns what failed, or "".
  std::string open_host(int device, CUcontext ctx, const char** chip_name);
  std::string add_metrics(const std::vector<std::string>& names, const char* chip_name);
  std::string build_config_image();
  std::string enable_range_profiler(CUcontext ctx);
};

// The chip's name and counter availability, then the host object the
// metrics are configured on.
std::string RangeMetrics::State::open_host(int device, CUcontext ctx, const char** chip_name) {
  auto chip = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  chip.deviceIndex = static_cast<size_t>(device);
  if (CUptiResult r = cuptiDeviceGetChipName(&chip); r != CUPTI_SUCCESS) return describe("cuptiDeviceGetChipName", r);
  *chip_name = chip.pChipName;
  auto avail =
      params<CUpti_Profiler_GetCounterAvailability_Params>(CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  avail.ctx = ctx;
  if (cuptiProfilerGetCounterAvailability(&avail) == CUPTI_SUCCESS && avail.counterAvailabilityImageSize > 0) {
    availability.resize(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = availability.data();
    if (cuptiProfilerGetCounterAvailability(&avail) != CUPTI_SUCCESS) availability.clear();
  }
  auto init = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  init.pChipName = chip.pChipName;
  init.pCounterAvailabilityImage = availability.empty() ? nullptr : availability.data();
  if (CUptiResult r = cuptiProfilerHostInitialize(&init); r != CUPTI_SUCCESS) {
    return describe("cuptiProfilerHostInitialize", r);
  }
  host = init.pHostObject;
  return "";
}

// One at a time, so that a metric this chip or driver does not know costs
// only itself. (Names stay owned by `metrics`.)
std::string RangeMetrics::State::add_metrics(const std::vector<std::string>& names, const char* chip_name) {
  metrics.reserve(names.size());
  for (const auto& name : names) {
    const char* p = name.c_str();
    auto add =
        params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    add.pHostObject = host;
    add.ppMetricNames = &p;
    add.numMetrics = 1;
    if (cuptiProfilerHostConfigAddMetrics(&add) == CUPTI_SUCCESS) {
      metrics.push_back(name);
    } else {
      unsupported.push_back(name);
    }
  }
  if (metrics.empty()) return "none of the requested metrics is supported on " + std::string(chip_name);
  for (const auto& m : metrics) metric_ptrs.push_back(m.c_str());
  return "";
}

// The configuration image of the metrics, and how many passes it needs.
std::string RangeMetrics::State::build_config_image() {
  auto size =
      params<CUpti_Profiler_Host_GetConfigImageSize_Params>(CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  size.pHostObject = host;
  if (CUptiResult r = cuptiProfilerHostGetConfigImageSize(&size); r != CUPTI_SUCCESS) {
    return describe("cuptiProfilerHostGetConfigImageSize", r);
  }
  config.resize(size.configImageSize);
  auto image = params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  image.pHostObject = host;
  image.configImageSize = config.size();
  image.pConfigImage = config.data();
  if (CUptiResult r = cuptiProfilerHostGetConfigImage(&image); r != CUPTI_SUCCESS) {
    return describe("cuptiProfilerHostGetConfigImage", r);
  }
  auto count = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  count.configImageSize = config.size();
  count.pConfigImage = config.data();
  if (cuptiProfilerHostGetNumOfPasses(&count) == CUPTI_SUCCESS) passes = count.numOfPasses;
  return "";
}

// The range profiler on the context, its counter data image, and the
// configuration: one user range, user replay.
std::string RangeMetrics::State::enable_range_profiler(CUcontext ctx) {
  auto enable = params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
  enable.ctx = ctx;
  if (CUptiResult r = cuptiRangeProfilerEnable(&enable); r != CUPTI_SUCCESS) {
    return describe("cuptiRangeProfilerEnable", r);
  }
  profiler = enable.pRangeProfilerObject;
  auto data_size =
      params<CUpti_RangeProfiler_GetCounterDataSize_Params>(CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
  data_size.pRangeProfilerObject = profiler;
  data_size.pMetricNames = metric_ptrs.data();
  data_size.numMetrics = metric_ptrs.size();
  data_size.maxNumOfRanges = 1;
  data_size.maxNumRangeTreeNodes = 1;
  if (CUptiResult r = cuptiRangeProfilerGetCounterDataSize(&data_size); r != CUPTI_SUCCESS) {
    return describe("cuptiRangeProfilerGetCounterDataSize", r);
  }
  counter_data.resize(data_size.counterDataSize);
  auto data_init = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  data_init.pRangeProfilerObject = profiler;
  data_init.counterDataSize = counter_data.size();
  data_init.pCounterData = counter_data.data();
  if (CUptiResult r = cuptiRangeProfilerCounterDataImageInitialize(&data_init); r != CUPTI_SUCCESS) {
    return describe("cuptiRangeProfilerCounterDataImageInitialize", r);
  }
  auto set = params<CUpti_RangeProfiler_SetConfig_Params>(CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
  set.pRangeProfilerObject = profiler;
  set.configSize = config.size();
  set.pConfig = config.data();
  set.counterDataImageSize = counter_data.size();
  set.pCounterDataImage = counter_data.data();
  set.range = CUPTI_UserRange;
  set.replayMode = CUPTI_UserReplay;
  set.maxRangesPerPass = 1;
  set.numNestingLevels = 1;
  set.minNestingLevel = 1;
  set.passIndex = 0;
  set.targetNestingLevel = 1;
  if (CUptiResult r = cuptiRangeProfilerSetConfig(&set); r != CUPTI_SUCCESS) {
    return describe("cuptiRangeProfilerSetConfig", r);
  }
  return "";
}

RangeMetrics::RangeMetrics(int device, const std::vector<std::string>& metrics) : state_(std::make_unique<State>()) {
  State& s = *state_;
  auto last = std::chrono::steady_clock::now();
  auto step_done = [&](const char* step) {
    const auto now = std::chrono::steady_clock::now();
    setup_phases_ms_.emplace_back(step, std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  };
  auto init = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  if (CUptiResult r = cuptiProfilerInitialize(&init); r != CUPTI_SUCCESS) {
    error_ = describe("cuptiProfilerInitialize", r);
    return;
  }
  s.profiler_initialized = true;
  step_done("initialize");
  CUcontext ctx = current_context();
  if (ctx == nullptr) {
    error_ = "no current CUDA context for the range profiler";
    return;
  }
  const char* chip_name = nullptr;
  error_ = s.open_host(device, ctx, &chip_name);
  step_done("host");
  if (error_.empty()) error_ = s.add_metrics(metrics, chip_name);
  step_done("metrics");
  if (error_.empty()) error_ = s.build_config_image();
  step_done("config_image");
  if (error_.empty()) error_ = s.enable_range_profiler(ctx);
  step_done("enable");
}

RangeMetrics::~RangeMetrics() {
  State& s = *state_;
  if (s.profiler != nullptr) {
    auto disable = params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    disable.pRangeProfilerObject = s.profiler;
    cuptiRangeProfilerDisable(&disable);
  }
  if (s.host != nullptr) {
    auto deinit = params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    deinit.pHostObject = s.host;
    cuptiProfilerHostDeinitialize(&deinit);
  }
  if (s.profiler_initialized) {
    auto deinit = params<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
    cuptiProfilerDeInitialize(&deinit);
  }
}

nlohmann::json RangeMetrics::collect(const std::function<void()>& before_pass, const std::function<void()>& run_once) {
  if (!available()) throw std::runtime_error(error_);
  State& s = *state_;
  if (s.used) throw std::runtime_error("the range profiler was already used by this runner");
  s.used = true;
  size_t pass = 0;
  for (bool done = false; !done; ++pass) {
    if (pass >= kMaxPasses) throw std::runtime_error("the range profiler did not finish within 64 replay passes");
    before_pass();
    auto start = params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
    start.pRangeProfilerObject = s.profiler;
    if (CUptiResult r = cuptiRangeProfilerStart(&start); r != CUPTI_SUCCESS) {
      throw std::runtime_error(describe("cuptiRangeProfilerStart", r));
    }
    auto push = params<CUpti_RangeProfiler_PushRange_Params>(CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE);
    push.pRangeProfilerObject = s.profiler;
    push.pRangeName = kRangeName;
    if (CUptiResult r = cuptiRangeProfilerPushRange(&push); r != CUPTI_SUCCESS) {
      throw std::runtime_error(describe("cuptiRangeProfilerPushRange", r));
    }
    run_once();
    auto pop = params<CUpti_RangeProfiler_PopRange_Params>(CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE);
    pop.pRangeProfilerObject = s.profiler;
    if (CUptiResult r = cuptiRangeProfilerPopRange(&pop); r != CUPTI_SUCCESS) {
      throw std::runtime_error(describe("cuptiRangeProfilerPopRange", r));
    }
    auto stop = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
    stop.pRangeProfilerObject = s.profiler;
    if (CUptiResult r = cuptiRangeProfilerStop(&stop); r != CUPTI_SUCCESS) {
      throw std::runtime_error(describe("cuptiRangeProfilerStop", r));
    }
    done = stop.isAllPassSubmitted != 0;
  }
  auto decode = params<CUpti_RangeProfiler_DecodeData_Params>(CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
  decode.pRangeProfilerObject = s.profiler;
  if (CUptiResult r = cuptiRangeProfilerDecodeData(&decode); r != CUPTI_SUCCESS) {
    throw std::runtime_error(describe("cuptiRangeProfilerDecodeData", r));
  }
  auto info =
      params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = s.counter_data.data();
  info.counterDataImageSize = s.counter_data.size();
  if (CUptiResult r = cuptiRangeProfilerGetCounterDataInfo(&info); r != CUPTI_SUCCESS) {
    throw std::runtime_error(describe("cuptiRangeProfilerGetCounterDataInfo", r));
  }
  if (info.numTotalRanges < 1) throw std::runtime_error("the range profiler recorded no range");
  std::vector<double> values(s.metric_ptrs.size(), 0.0);
  auto eval = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
  eval.pHostObject = s.host;
  eval.pCounterDataImage = s.counter_data.data();
  eval.counterDataImageSize = s.counter_data.size();
  eval.rangeIndex = 0;
  eval.ppMetricNames = s.metric_ptrs.data();
  eval.numMetrics = s.metric_ptrs.size();
  eval.pMetricValues = values.data();
  if (CUptiResult r = cuptiProfilerHostEvaluateToGpuValues(&eval); r != CUPTI_SUCCESS) {
    throw std::runtime_error(describe("cuptiProfilerHostEvaluateToGpuValues", r));
  }
  nlohmann::json out = {{"values", nlohmann::json::object()}, {"passes", pass}, {"unsupported", s.unsupported}};
  for (size_t i = 0; i < s.metrics.size(); ++i) out["values"][s.metrics[i]] = values[i];
  return out;
}

}  // namespace kforge::cupti
