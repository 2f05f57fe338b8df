// The filters a synthesized task must pass (docs/architecture.md#data-synthesis,
// docs/data-synthesis.md#filters-and-their-thresholds),
// run in-process on the ATen reference (core/reference.h) on the target
// device. Each rejection names one reason from filter_reasons(), counted in
// the run's rejection report. Thresholds and why: docs/data-synthesis.md.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/task_spec.h"
#include "kforge/data_synth/shape_sampler.h"

namespace kforge::synth {

// Every reason an attempt can be rejected for: the composer and shape
// sampler's, the filters', the judge's reference check (judge_check, from the
// baseline callback) or its system errors past their retries (judge_error),
// then deduplication and contamination.
const std::vector<std::string>& rejection_reasons();

struct FilterOptions {
  at::Device device = at::Device(at::kCPU);
  RuntimeWindow window;
  // Timed calls after one warm-up; the fastest is recorded (filters.cpp,
  // time_eager: the statistic load moves least).
  int timing_runs = 5;
  // The cost model decides whether a task is inside the window (shape_search);
  // the measured time rejects it only when it lies more than this factor
  // outside an edge (below lo / far_outside or above hi * far_outside): a
  // cost-model miss that large, never load or timing noise near an edge,
  // which would let the machine's load pick a slot's task. 10, not 3: the
  // CPU's model assumes DRAM bandwidth, and a task whose data stays in cache
  // runs an order of magnitude faster (mul>pow on 3x4096 floats: predicted
  // 0.086 ms, measured 0.0088 ms in some runs of the synthesizer and below
  // 0.0067 in others, across a bound of 0.02 / 3 ms, so the slot's task
  // changed from run to run on a 2-core host).
  double far_outside = 10.0;
  // Two outputs count as "the same" (seed-insensitive, no-op op) when every
  // element is within this fraction of the task's tolerance.
  double same_fraction = 1.0;
  // constant_passes: one constant (the output's mean, median or zero) is
  // within the task's tolerance of at least this share of an output's
  // elements. A kernel that writes it would be mostly right, and the whole of
  // a softmax over a long row is within atol of 1/N.
  double constant_fraction = 0.9;
  // activation_insensitive: redrawing one input (parameters held) leaves at
  // least this share of the output elements within the tolerance. Not all of
  // them: a saturated path (sigmoid of a large std) can flip a few elements
  // through a threshold and still leave the output a function of the weights.
  double insensitive_share = 0.99;
  // The float32 (or half) reference must agree with the float64 one within
  // this fraction of the tolerance: a reference that uses up its own
  // tolerance leaves nothing for an honest kernel.
  double precision_fraction = 0.5;
  // Nondeterminism: two runs on the same inputs differ by more than this
  // fraction of the tolerance.
  double determinism_fraction = 0.1;
  // Scale the task's atol to its outputs' magnitude before any check
  // (magnitude_tolerance); the verdict carries the tolerance the task must
  // record. Off: the task's tolerance is used as given.
  bool scale_tolerance = true;
  // output_magnitude: a task whose outputs' magnitude would scale atol by more
  // than this is rejected. An H200 set had one task at 2^25 (softplus, add,
  // cumsum, mul, pow: outputs ~3e7), where atol 3.4e5 says little about a
  // kernel; 2^10 keeps the big-K GEMMs and long sums (factors 32-1024).
  double max_atol_scale = 1024;
  // On a GPU, timing takes this lock exclusively and every other reference
  // run shares it, so that the timed runs have the device to themselves.
  std::shared_mutex* device_lock = nullptr;
};

struct FilterVerdict {
  bool passed = false;
  std::string reason;   // one of rejection_reasons() when rejected
  std::string detail;   // what was seen, e.g. "node 2 (relu) is a no-op: ..."
  double eager_ms = 0;  // fastest timed run (when the task got that far)
  // Whether eager_ms is inside the window itself: an annotation only (the
  // verdict used far_outside).
  bool measured_in_window = false;
  // The tolerance the filters applied and the task must carry: the given one
  // with atol scaled to the outputs' magnitude (FilterOptions::scale_tolerance),
  // and the factor atol was multiplied by (1 when not scaled).
  Tolerance tolerance;
  double atol_scale = 1;
};

FilterVerdict run_filters(const TaskSpec& task, const FilterOptions& options);

// The factor a task's atol is multiplied by for outputs of this magnitude:
// the power of two nearest the outputs' typical magnitude, the median |x| over
// the finite nonzero elements (the largest over the floating outputs), and 1
// when that is at most 1 or there is none. The median, not the RMS: a heavy
// tail (exp of a wide value, RMS 10^4 where most elements are near 1) would
// otherwise loosen atol for the bulk of the elements, which a kernel could
// then compute in lower precision; zeros excluded: a relu or a mask makes
// them exactly, whatever the magnitude of what was summed. A power of two so
// that rounding noise cannot move it (the tolerance is written into the task,
// which must come out byte-identical).
double atol_scale_for(const std::vector<at::Tensor>& outputs);

// `base` with atol scaled to the outputs' magnitude (atol_scale_for); rtol as
// given. Why: an honest kernel that sums in another order (split-K, a tree
// reduction, a half-precision partial sum) is off by a rounding error of the
// order of the outputs' typical magnitude, not of each element's own: where a
// long reduction or a big GEMM gives outputs of magnitude 100, an element that
// happens to lie near 0 is still off by ~eps x 100, which rtol x |element|
// does not cover and a fixed atol of 1e-2 rejects. The scaled atol is the same
// fraction of the typical magnitude that the dtype's atol is of 1, so a
// constant or a wrong result still fails it (the constant_passes filter
// applies it too, and the judge's relative-L2 and degenerate-output checks do
// not depend on atol).
Tolerance magnitude_tolerance(const Tolerance& base, const std::vector<at::Tensor>& outputs);

// Initializes what ATen creates lazily on first use of a device (its default
// generator, BLAS and convolution handles, the caching allocator) on the
// calling thread, before worker threads run filters concurrently: lazy
// initialization racing between 8 workers is the suspect of a SIGSEGV seen
// once on the H200 (tests/data_synth/synth_gpu_test.cpp). A no-op on the CPU.
void prepare_device(const at::Device& device);

// The nondeterminism verdict on the outputs of two runs on the same inputs:
// why they count as different (more than options.determinism_fraction of the
// tolerance apart anywhere), or nullopt. Separate from run_filters because no
// op of the vocabulary is nondeterministic on the CPU, so a test gives it two
// real outputs that differ.
std::optional<std::string> nondeterminism(const std::vector<at::Tensor>& first, const std::vector<at::Tensor>& second,
                                          const Tolerance& tol, const FilterOptions& options);

// The task with node `index` removed: its output replaced by its input
// `input_slot`. nullopt when that input's type differs from the output's
// (removing the op would change the graph's shapes: it is not a no-op).
std::optional<TaskSpec> without_node(const TaskSpec& task, size_t index, size_t input_slot);

}  // namespace kforge::synth
