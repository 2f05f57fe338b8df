#include "kforge/data_synth/shape_sampler.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "kforge/core/number_text.h"
#include "kforge/core/op_registry.h"
#include "kforge/data_synth/rng.h"

namespace kforge::synth {
namespace {

// 1, 2, 3, 4, 6, 8, 12, 16, ...: powers of two and their 1.5 multiples.
std::vector<int64_t> batch_grid(int64_t max_batch) {
  std::vector<int64_t> grid;
  for (int64_t p = 1; p <= max_batch; p *= 2) {
    grid.push_back(p);
    if (p >= 2 && p + p / 2 <= max_batch) grid.push_back(p + p / 2);
  }
  return grid;
}

// Variant batches: half, then an odd size near three quarters, then others;
// never the task's own batch and never two equal ones.
std::vector<int64_t> variant_batches(int64_t batch, int count) {
  std::vector<int64_t> candidates = {batch / 2, (batch * 3 / 4) | 1, batch + 1, batch * 2, batch + 3};
  std::vector<int64_t> out;
  std::set<int64_t> seen = {batch};
  for (int64_t b : candidates) {
    if (b >= 1 && seen.insert(b).second) out.push_back(b);
    if (static_cast<int>(out.size()) == count) break;
  }
  return out;
}

}  // namespace

RuntimeWindow default_window(const std::string& backend) {
  if (backend == "cpu") return {0.02, 20.0};
  return {0.05, 20.0};
}

std::variant<SampledShapes, ShapeRejection> sample_shapes(uint64_t seed, const ComposeOptions& compose_options,
                                                          const ShapeOptions& options, const DeviceProfile& profile) {
  Rng rng(derive_seed(seed, {0x5a3e}));
  const double lo = options.window.lo_ms * options.margin;
  const double hi = std::max(lo, options.window.hi_ms / options.margin);
  const double target = std::exp(std::log(lo) + rng.uniform() * (std::log(hi) - std::log(lo)));
  const bool odd = rng.chance(0.2);

  // The largest grid batch whose predicted time stays under the target (the
  // smallest batch when even that is over it).
  const std::vector<int64_t> grid = batch_grid(options.max_batch);
  int64_t chosen = grid.front();
  for (int64_t b : grid) {
    Composition c = compose(seed, b, compose_options);
    if (graph_bytes(c.task) > options.memory_cap_bytes) break;
    if (predict_eager_ms(c.task, profile) > target && b != grid.front()) break;
    chosen = b;
    if (predict_eager_ms(c.task, profile) > target) break;
  }
  // Sometimes a size no one rounds to: kernels must not assume divisibility.
  if (odd && chosen > 4) chosen -= 1;

  Composition c = compose(seed, chosen, compose_options);
  SampledShapes s;
  s.batch = chosen;
  s.pattern = c.pattern;
  s.predicted_ms = predict_eager_ms(c.task, profile);
  s.bytes = graph_bytes(c.task);
  if (s.bytes > options.memory_cap_bytes) {
    return ShapeRejection{"memory_cap", "needs " + format_significant(s.bytes / 1048576.0) + " MiB at batch " +
                                            std::to_string(chosen) + ", over the cap of " +
                                            format_significant(options.memory_cap_bytes / 1048576.0) + " MiB"};
  }
  // A task whose nearest batch is predicted close to an edge (batch 1
  // already slow, or the largest batch still fast) is refused here, by the
  // deterministic cost model, rather than left to the measured window filter,
  // where machine load decides on which side of the edge it falls.
  const double edge = std::sqrt(std::max(1.0, options.margin));
  const double accept_lo = options.window.lo_ms * edge, accept_hi = options.window.hi_ms / edge;
  if (s.predicted_ms < accept_lo || s.predicted_ms > accept_hi) {
    return ShapeRejection{"shape_search", "predicted " + format_significant(s.predicted_ms) + " ms at batch " +
                                              std::to_string(chosen) + ", outside [" + format_significant(accept_lo) +
                                              ", " + format_significant(accept_hi) + "] ms, the window [" +
                                              format_significant(options.window.lo_ms) + ", " +
                                              format_significant(options.window.hi_ms) + "] ms less a factor " +
                                              format_significant(edge) + " from each edge"};
  }
  const double bound = bandwidth_bound_ms(c.task, profile);
  if (s.predicted_ms < options.min_headroom * bound) {
    return ShapeRejection{"near_roofline", "predicted " + format_significant(s.predicted_ms) +
                                               " ms against a bandwidth bound of " + format_significant(bound) +
                                               " ms: under " + format_significant(options.min_headroom) +
                                               "x, nothing for a kernel to gain"};
  }
  s.task = std::move(c.task);
  for (int64_t vb : variant_batches(chosen, std::max(2, options.variants))) {
    std::map<std::string, std::vector<int64_t>> variant;
    for (const auto& in : s.task.inputs) {
      std::vector<int64_t> shape = in.shape;
      shape[0] = vb;
      variant[in.name] = shape;
    }
    s.task.shape_variants.push_back(variant);
    const TaskSpec v = s.task.with_variant(s.task.shape_variants.size() - 1);
    infer_graph(v);  // InputError: the variant does not type-check
    if (graph_bytes(v) > options.memory_cap_bytes) {
      return ShapeRejection{"memory_cap", "shape variant " + std::to_string(s.task.shape_variants.size()) + " (batch " +
                                              std::to_string(vb) + ") is over the memory cap"};
    }
  }
  return s;
}

}  // namespace kforge::synth
