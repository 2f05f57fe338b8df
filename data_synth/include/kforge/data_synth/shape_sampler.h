// The shape sampler: picks the batch size at which a composed graph's eager
// time lands in the target device's runtime window, under a memory cap, and
// adds shape variants (docs/architecture.md#data-synthesis).
//
// Sizes other than the batch are drawn log-uniformly by the composer; the
// batch is chosen on a log grid with the cost model (cost_model.h) so that
// the choice depends on the seed only. The cost model also decides whether the
// task is inside the window; the measured eager time (filters.h) annotates it
// and rejects only a gross miss of the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "kforge/data_synth/composer.h"
#include "kforge/data_synth/cost_model.h"

namespace kforge::synth {

struct RuntimeWindow {
  double lo_ms = 0.05;
  double hi_ms = 20.0;
};

// GPU default 0.05-20 ms; CPU (one ATen thread) 0.02-20 ms.
RuntimeWindow default_window(const std::string& backend);

struct ShapeOptions {
  RuntimeWindow window;
  // The sampler aims at a time drawn log-uniformly from the middle of the
  // window: [lo * margin, hi / margin], so cost-model error and timing noise
  // rarely carry a task across an edge. A task whose nearest batch is
  // predicted within a factor sqrt(margin) of an edge is refused
  // (shape_search) before anything is measured.
  double margin = 3.0;
  // Every tensor of one call (inputs, intermediates, outputs) together.
  double memory_cap_bytes = 2.0 * (1ull << 30);
  int64_t max_batch = 1 << 16;
  // Extra shape variants per task (the batch changed); at least two.
  int variants = 2;
  // near_roofline: the cost model's eager time is under this multiple of the
  // fused task's bandwidth bound (bandwidth_bound_ms): one memory-bound pass
  // that eager PyTorch already runs at the bandwidth. Decided by the cost
  // model, like the window, so that it does not depend on the machine's load.
  double min_headroom = 1.5;
};

struct SampledShapes {
  TaskSpec task;  // at the chosen batch, with shape variants
  std::string pattern;
  int64_t batch = 0;
  double predicted_ms = 0;
  double bytes = 0;
};

struct ShapeRejection {
  std::string reason;  // "shape_search", "memory_cap" or "near_roofline"
  std::string detail;
};

// Composes the graph of `seed` at a batch aimed into the window. Returns the
// task or why no batch size fits. InputError propagates from compose() when
// the drawn graph does not type-check (counted as "compose_invalid").
std::variant<SampledShapes, ShapeRejection> sample_shapes(uint64_t seed, const ComposeOptions& compose_options,
                                                          const ShapeOptions& options, const DeviceProfile& profile);

}  // namespace kforge::synth
