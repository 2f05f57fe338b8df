// Roofline classification of one measured kernel (or one kf_forward call):
// from the bytes it must move, the floating-point work it does and its
// measured time, decide whether it is compute-, memory-, latency- or
// launch-bound, and say what to do about it. A helper for the profile step
// (docs/architecture.md#timing) and for analysis tools; no GPU needed.
#pragma once

#include <string>
#include <vector>

#include "kforge/core/document.h"

namespace kforge::env {

// Ceilings of a device. Use measured values where they exist: datasheet
// numbers are leads (the H200's: docs/analysis-tools.md).
struct DevicePeaks {
  std::string name;
  double memory_bytes_per_s = 0.0;  // device memory, read + write
  double fp32_flops_per_s = 0.0;    // FFMA counted as 2 FLOP
  double tensor_flops_per_s = 0.0;  // dense 16-bit tensor-core rate
  double launch_overhead_s = 0.0;   // cost of one launch on an idle stream

  // H200 SXM: 4.3 TB/s measured device-to-device copy (bytes read + written),
  // ~67 TFLOP/s FP32 and ~990 TFLOP/s dense BF16 (datasheet), ~4 us launch.
  static DevicePeaks h200();
};

enum class Bound { kCompute, kMemory, kLatency, kLaunch };
const std::string& bound_name(Bound bound);  // "compute", "memory", "latency", "launch"

struct RooflineInput {
  double bytes = 0.0;         // the fewest bytes that must move through device memory
  double flops = 0.0;         // floating-point operations
  double time_s = 0.0;        // measured time, > 0
  int launches = 1;           // kernel launches inside time_s
  bool tensor_cores = false;  // the FLOPs can run on tensor cores (matmul, conv)
  // A unit at or above this fraction of its ceiling is "the bound".
  double saturation = 0.6;
  // Measurements this far under the floor are implausible (timing error or a
  // skipped computation), not fast.
  double floor_tolerance = 0.05;
};

struct RooflineResult {
  Bound bound = Bound::kLatency;
  double arithmetic_intensity = 0.0;  // flops / bytes (0 when bytes == 0)
  double ridge_intensity = 0.0;       // peak flops / peak bandwidth
  bool memory_side = true;            // intensity below the ridge: bytes set the floor
  double achieved_bytes_per_s = 0.0;
  double achieved_flops_per_s = 0.0;
  double memory_fraction = 0.0;   // of the memory ceiling
  double compute_fraction = 0.0;  // of the compute ceiling in use
  double floor_s = 0.0;           // max(bytes / bandwidth, flops / peak)
  double efficiency = 0.0;        // floor_s / time_s (1.0 = on the roofline)
  bool below_floor = false;       // faster than physically possible
  std::vector<std::string> hints;
};

// Throws InputError for a non-positive time, negative work or a device
// without ceilings.
RooflineResult classify_roofline(const RooflineInput& input, const DevicePeaks& peaks);

json to_json(const RooflineResult& result);

}  // namespace kforge::env
