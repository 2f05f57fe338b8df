#include "judge/timing_tamper.h"

#include <cstdio>

namespace kforge::judge {

std::string check_self_within_round_trip(double self_ms, double round_trip_ms) {
  if (self_ms <= round_trip_ms + kClockSlackMs) return "";
  char buf[160];
  std::snprintf(buf, sizeof(buf), "the runner reported %.3f ms for a call the judge saw complete in %.3f ms", self_ms,
                round_trip_ms);
  return buf;
}

std::string check_self_covers_cpu_time(const SampleSummary& self, const SampleSummary& cpu) {
  if (self.samples == 0 || cpu.samples == 0) return "";
  // A third: the CPU figure also carries protocol work that runs slower with
  // cold caches than in the null-call calibration (measured: self 0.51 ms vs
  // CPU 0.78 ms for a 0.5 ms kernel after a cache flush). That extra work is
  // about constant per call, so it also gets an absolute allowance: on the
  // loaded 2-core dev VM a 0.003 ms kernel showed 0.185 ms of CPU time.
  if (self.median >= cpu.median / 3 - kColdProtocolSlackMs) return "";
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "the runner's clock reported a median of %.3f ms per call, but the kernel accounted %.3f ms of CPU "
                "time to it",
                self.median, cpu.median);
  return buf;
}

std::string check_device_time_covers_wall(const SampleSummary& device, const SampleSummary& wall) {
  if (device.samples == 0 || wall.samples == 0) return "";
  if (device.median >= wall.median * (1 - kDeviceWallFraction) - kDeviceWallSlackMs) return "";
  char buf[240];
  std::snprintf(buf, sizeof(buf),
                "the runner's device clock reported a median of %.4f ms per call, but the judge measured %.4f ms "
                "from sending each call to receiving its reply (harness overhead removed)",
                device.median, wall.median);
  return buf;
}

}  // namespace kforge::judge
