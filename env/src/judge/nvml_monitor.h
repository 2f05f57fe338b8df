// GPU clocks, power and energy from NVML, recorded with every timing result
// (docs/architecture.md#timing) and used for the optional energy-per-call figure.
//
// NVML is loaded with dlopen at run time: the CUDA toolkit on dev/CI machines
// ships no nvml.h or libnvidia-ml, and a judge whose machine lacks the driver's
// library must still run (its reports then say why clocks are missing). The
// handful of NVML entry points used here have had stable C signatures since
// NVML 10, so they are declared locally.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kforge::judge {

class NvmlMonitor {
 public:
  // The NVML device with this PCI bus id (as cudaDeviceGetPCIBusId writes it).
  // Null with `why_not` set when NVML or the device cannot be reached.
  static std::unique_ptr<NvmlMonitor> open(const std::string& pci_bus_id, std::string* why_not);
  ~NvmlMonitor();
  NvmlMonitor(const NvmlMonitor&) = delete;
  NvmlMonitor& operator=(const NvmlMonitor&) = delete;

  // {"sm_mhz", "memory_mhz", "max_sm_mhz", "max_memory_mhz", "app_sm_mhz",
  //  "temperature_c", "power_w", "clock_event_reasons": [...]}; fields NVML
  // cannot give are left out.
  nlohmann::json clocks() const;
  // Total energy since the driver loaded, in millijoules (Volta and later).
  std::optional<uint64_t> energy_mj() const;
  std::optional<double> max_memory_clock_mhz() const;
  // Whether the SM clock runs at kAtSpeedFraction of its target or more: the
  // applications clock (what the GPU runs at under load unless a power or
  // thermal limit holds it back), else the maximum. False when NVML cannot
  // say, and while a limit holds the clock lower (the caller then waits as
  // long as it would without a reading).
  bool sm_clock_at_speed() const;
  static constexpr double kAtSpeedFraction = 0.9;

  struct Api;

 private:
  NvmlMonitor() = default;
  std::unique_ptr<Api> api_;
  void* device_ = nullptr;
};

// Names of the bits of nvmlDeviceGetCurrentClocksEventReasons, e.g.
// {"sw_power_cap", "hw_thermal_slowdown"}; "idle" alone for an idle GPU.
nlohmann::json clock_event_reason_names(unsigned long long reasons);

}  // namespace kforge::judge
