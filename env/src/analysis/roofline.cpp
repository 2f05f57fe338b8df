#include "kforge/env/analysis/roofline.h"

#include <algorithm>
#include <cmath>

#include "kforge/core/error.h"
#include "text_util.h"

namespace kforge::env {
namespace {

using internal::format_fixed;
using internal::format_percent;

std::string micros(double seconds) { return format_fixed(seconds * 1e6, seconds < 1e-4 ? 1 : 0) + " us"; }

// The advice for the bound the measurement falls under.
std::string bound_hint(const RooflineInput& in, const DevicePeaks& peaks, const RooflineResult& r) {
  const std::string bw = format_percent(std::min(r.memory_fraction, 9.99)) + " of peak bandwidth";
  const std::string fl = format_percent(std::min(r.compute_fraction, 9.99)) + " of peak " +
                         (in.tensor_cores ? "tensor-core" : "FP32") + " FLOP/s";
  switch (r.bound) {
    case Bound::kLaunch:
      return micros(in.time_s / in.launches) + " per launch is close to the ~" + micros(peaks.launch_overhead_s) +
             " cost of a launch itself: fuse the kernels into one, do more work per launch, or capture "
             "the launches in a CUDA graph.";
    case Bound::kMemory:
      if (r.memory_fraction >= 0.8) {
        return "memory-bound at " + bw +
               ": the kernel is on the bandwidth roofline, so only moving fewer bytes helps (fuse "
               "producer and consumer ops, keep intermediates on chip, read each input once).";
      }
      return "memory-bound at " + bw +
             ": 16-byte vector accesses coalesced across the warp, several independent loads in "
             "flight per thread, and enough blocks for every SM bring it closer to the ceiling.";
    case Bound::kCompute:
      if (in.tensor_cores) {
        return "compute-bound at " + fl +
               ": near the tensor-core ceiling; remaining gains are in overlapping the epilogue and "
               "data movement with the matrix instructions.";
      }
      return "compute-bound at " + fl +
             ": fuse multiplies and adds into FMAs, use fast intrinsics (__expf, rsqrtf) where the "
             "tolerance allows, and remove redundant arithmetic; if the work is a matrix product, "
             "tensor cores raise the ceiling by an order of magnitude.";
    case Bound::kLatency:
      break;
  }
  return "latency-bound: neither memory (" + bw + ") nor arithmetic (" + fl +
         ") is near its ceiling. Put more independent work in flight: more resident warps (see "
         "occupancy), several loads per thread before the first use, fewer barriers and atomics on "
         "the critical path, and a grid that covers every SM.";
}

}  // namespace

DevicePeaks DevicePeaks::h200() {
  DevicePeaks p;
  p.name = "NVIDIA H200";
  // Measured here: device-to-device copy, bytes read + written (KINDS.md, 2026-10-28).
  p.memory_bytes_per_s = 4.3e12;
  // Datasheet leads for the SXM part (H200.md): FP32 ~67 TFLOP/s, dense BF16 ~990.
  p.fp32_flops_per_s = 67e12;
  p.tensor_flops_per_s = 990e12;
  // A launch on an idle stream costs a few microseconds end to end.
  p.launch_overhead_s = 4e-6;
  return p;
}

const std::string& bound_name(Bound bound) {
  static const std::string kNames[] = {"compute", "memory", "latency", "launch"};
  return kNames[static_cast<int>(bound)];
}

RooflineResult classify_roofline(const RooflineInput& in, const DevicePeaks& peaks) {
  if (!(in.time_s > 0) || !std::isfinite(in.time_s)) throw InputError("roofline: the measured time must be positive");
  if (!(in.bytes >= 0) || !(in.flops >= 0) || !std::isfinite(in.bytes) || !std::isfinite(in.flops)) {
    throw InputError("roofline: bytes and flops must be finite and >= 0");
  }
  if (in.launches < 1) throw InputError("roofline: launches must be >= 1");
  const double peak_flops =
      in.tensor_cores && peaks.tensor_flops_per_s > 0 ? peaks.tensor_flops_per_s : peaks.fp32_flops_per_s;
  if (!(peaks.memory_bytes_per_s > 0) || !(peak_flops > 0)) {
    throw InputError("roofline: the device peaks (" + peaks.name + ") need a memory bandwidth and a FLOP rate");
  }

  RooflineResult r;
  r.ridge_intensity = peak_flops / peaks.memory_bytes_per_s;
  r.arithmetic_intensity = in.bytes > 0 ? in.flops / in.bytes : 0.0;
  r.memory_side = in.bytes > 0 ? r.arithmetic_intensity < r.ridge_intensity : in.flops == 0;
  r.achieved_bytes_per_s = in.bytes / in.time_s;
  r.achieved_flops_per_s = in.flops / in.time_s;
  r.memory_fraction = r.achieved_bytes_per_s / peaks.memory_bytes_per_s;
  r.compute_fraction = r.achieved_flops_per_s / peak_flops;
  r.floor_s = std::max(in.bytes / peaks.memory_bytes_per_s, in.flops / peak_flops);
  r.efficiency = r.floor_s / in.time_s;
  r.below_floor = r.floor_s > 0 && in.time_s < r.floor_s * (1.0 - in.floor_tolerance);

  const double launch_share = peaks.launch_overhead_s * in.launches / in.time_s;
  if (launch_share >= 0.5) {
    r.bound = Bound::kLaunch;
  } else if (std::max(r.memory_fraction, r.compute_fraction) >= in.saturation) {
    r.bound = r.memory_fraction >= r.compute_fraction ? Bound::kMemory : Bound::kCompute;
  } else {
    r.bound = Bound::kLatency;
  }

  if (r.below_floor) {
    r.hints.push_back("the measured " + micros(in.time_s) + " is below the roofline floor of " + micros(r.floor_s) +
                      " for this much data and arithmetic: the timing is wrong or work was skipped; do not trust "
                      "this result.");
  }
  r.hints.push_back(bound_hint(in, peaks, r));
  if (r.bound != Bound::kMemory && r.bound != Bound::kCompute && r.floor_s > 0) {
    r.hints.push_back(std::string("by arithmetic intensity (") + format_fixed(r.arithmetic_intensity, 2) +
                      " FLOP/B against a ridge of " + format_fixed(r.ridge_intensity, 1) + ") this problem is " +
                      (r.memory_side ? "memory" : "compute") + "-bound at best: its floor is " + micros(r.floor_s) +
                      ", the measurement is " + format_percent(r.efficiency) + " of the roofline.");
  }
  return r;
}

json to_json(const RooflineResult& r) {
  return {{"bound", bound_name(r.bound)},
          {"arithmetic_intensity", r.arithmetic_intensity},
          {"ridge_intensity", r.ridge_intensity},
          {"memory_side", r.memory_side},
          {"achieved_bytes_per_s", r.achieved_bytes_per_s},
          {"achieved_flops_per_s", r.achieved_flops_per_s},
          {"memory_fraction", r.memory_fraction},
          {"compute_fraction", r.compute_fraction},
          {"floor_s", r.floor_s},
          {"efficiency", r.efficiency},
          {"below_floor", r.below_floor},
          {"hints", r.hints}};
}

}  // namespace kforge::env
