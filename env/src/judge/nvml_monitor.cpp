#include "judge/nvml_monitor.h"

#include <dlfcn.h>

#include <utility>
#include <vector>

namespace kforge::judge {
namespace {

// NVML's C types, as in nvml.h.
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kClockSm = 1;
constexpr int kClockMem = 2;
constexpr int kTemperatureGpu = 0;

template <typename Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(lib, name));
}

}  // namespace

struct NvmlMonitor::Api {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*handle_by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*clock_info)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*max_clock_info)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*app_clock)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*event_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;

  std::string describe(nvmlReturn_t rc) const {
    const char* s = error_string != nullptr ? error_string(rc) : nullptr;
    return s != nullptr ? s : "NVML error " + std::to_string(rc);
  }
};

std::unique_ptr<NvmlMonitor> NvmlMonitor::open(const std::string& pci_bus_id, std::string* why_not) {
  auto api = std::make_unique<Api>();
  api->lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api->lib == nullptr) {
    const char* e = ::dlerror();
    *why_not = std::string("libnvidia-ml.so.1 not loadable: ") + (e != nullptr ? e : "unknown error");
    return nullptr;
  }
  api->init = symbol<decltype(api->init)>(api->lib, "nvmlInit_v2");
  api->shutdown = symbol<decltype(api->shutdown)>(api->lib, "nvmlShutdown");
  api->error_string = symbol<decltype(api->error_string)>(api->lib, "nvmlErrorString");
  api->handle_by_pci = symbol<decltype(api->handle_by_pci)>(api->lib, "nvmlDeviceGetHandleByPciBusId_v2");
  api->clock_info = symbol<decltype(api->clock_info)>(api->lib, "nvmlDeviceGetClockInfo");
  api->max_clock_info = symbol<decltype(api->max_clock_info)>(api->lib, "nvmlDeviceGetMaxClockInfo");
  api->app_clock = symbol<decltype(api->app_clock)>(api->lib, "nvmlDeviceGetApplicationsClock");
  api->temperature = symbol<decltype(api->temperature)>(api->lib, "nvmlDeviceGetTemperature");
  api->power = symbol<decltype(api->power)>(api->lib, "nvmlDeviceGetPowerUsage");
  api->energy = symbol<decltype(api->energy)>(api->lib, "nvmlDeviceGetTotalEnergyConsumption");
  // Renamed in NVML 12.2; the old name remains as an alias in newer drivers.
  api->event_reasons = symbol<decltype(api->event_reasons)>(api->lib, "nvmlDeviceGetCurrentClocksEventReasons");
  if (api->event_reasons == nullptr) {
    api->event_reasons = symbol<decltype(api->event_reasons)>(api->lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
  }
  if (api->init == nullptr || api->handle_by_pci == nullptr || api->clock_info == nullptr) {
    *why_not = "libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetHandleByPciBusId_v2/nvmlDeviceGetClockInfo";
    ::dlclose(api->lib);
    return nullptr;
  }
  if (nvmlReturn_t rc = api->init(); rc != kNvmlSuccess) {
    *why_not = "nvmlInit: " + api->describe(rc);
    ::dlclose(api->lib);
    return nullptr;
  }
  nvmlDevice_t device = nullptr;
  if (nvmlReturn_t rc = api->handle_by_pci(pci_bus_id.c_str(), &device); rc != kNvmlSuccess) {
    *why_not = "NVML has no device at PCI " + pci_bus_id + ": " + api->describe(rc);
    if (api->shutdown != nullptr) api->shutdown();
    ::dlclose(api->lib);
    return nullptr;
  }
  std::unique_ptr<NvmlMonitor> m(new NvmlMonitor());
  m->api_ = std::move(api);
  m->device_ = device;
  return m;
}

NvmlMonitor::~NvmlMonitor() {
  if (api_ && api_->lib != nullptr) {
    if (api_->shutdown != nullptr) api_->shutdown();
    ::dlclose(api_->lib);
  }
}

nlohmann::json NvmlMonitor::clocks() const {
  nlohmann::json j = nlohmann::json::object();
  unsigned int v = 0;
  auto put = [&](const char* key, nvmlReturn_t (*fn)(nvmlDevice_t, int, unsigned int*), int arg) {
    if (fn != nullptr && fn(device_, arg, &v) == kNvmlSuccess) j[key] = v;
  };
  put("sm_mhz", api_->clock_info, kClockSm);
  put("memory_mhz", api_->clock_info, kClockMem);
  put("max_sm_mhz", api_->max_clock_info, kClockSm);
  put("max_memory_mhz", api_->max_clock_info, kClockMem);
  put("app_sm_mhz", api_->app_clock, kClockSm);
  put("temperature_c", api_->temperature, kTemperatureGpu);
  if (api_->power != nullptr && api_->power(device_, &v) == kNvmlSuccess) j["power_w"] = v / 1000.0;
  unsigned long long reasons = 0;
  if (api_->event_reasons != nullptr && api_->event_reasons(device_, &reasons) == kNvmlSuccess) {
    j["clock_event_reasons"] = clock_event_reason_names(reasons);
  }
  return j;
}

std::optional<uint64_t> NvmlMonitor::energy_mj() const {
  unsigned long long mj = 0;
  if (api_->energy == nullptr || api_->energy(device_, &mj) != kNvmlSuccess) return std::nullopt;
  return static_cast<uint64_t>(mj);
}

std::optional<double> NvmlMonitor::max_memory_clock_mhz() const {
  unsigned int v = 0;
  if (api_->max_clock_info == nullptr || api_->max_clock_info(device_, kClockMem, &v) != kNvmlSuccess) {
    return std::nullopt;
  }
  return static_cast<double>(v);
}

bool NvmlMonitor::sm_clock_at_speed() const {
  unsigned int now = 0, target = 0;
  if (api_->clock_info == nullptr || api_->clock_info(device_, kClockSm, &now) != kNvmlSuccess) return false;
  const bool app = api_->app_clock != nullptr && api_->app_clock(device_, kClockSm, &target) == kNvmlSuccess;
  if ((!app || target == 0) &&
      (api_->max_clock_info == nullptr || api_->max_clock_info(device_, kClockSm, &target) != kNvmlSuccess)) {
    return false;
  }
  return target > 0 && now >= kAtSpeedFraction * target;
}

nlohmann::json clock_event_reason_names(unsigned long long reasons) {
  static const std::vector<std::pair<unsigned long long, const char*>> kBits = {
      {0x1ull, "idle"},
      {0x2ull, "applications_clocks_setting"},
      {0x4ull, "sw_power_cap"},
      {0x8ull, "hw_slowdown"},
      {0x10ull, "sync_boost"},
      {0x20ull, "sw_thermal_slowdown"},
      {0x40ull, "hw_thermal_slowdown"},
      {0x80ull, "hw_power_brake_slowdown"},
      {0x100ull, "display_clock_setting"},
  };
  nlohmann::json names = nlohmann::json::array();
  for (const auto& [bit, name] : kBits) {
    if (reasons & bit) names.push_back(name);
  }
  return names;
}

}  // namespace kforge::judge
