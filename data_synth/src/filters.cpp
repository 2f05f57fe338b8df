#include "kforge/data_synth/filters.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "kforge/core/number_text.h"
#include "kforge/core/op_registry.h"
#include "kforge/core/output_spread.h"
#include "kforge/core/reference.h"

namespace kforge::synth {
namespace {

struct Rejected {
  std::string reason;
  std::string detail;
};

// Shared access to the device for untimed work (a no-op on the CPU).
class SharedUse {
 public:
  explicit SharedUse(std::shared_mutex* m) : m_(m) {
    if (m_) m_->lock_shared();
  }
  ~SharedUse() {
    if (m_) m_->unlock_shared();
  }
  SharedUse(const SharedUse&) = delete;
  SharedUse& operator=(const SharedUse&) = delete;

 private:
  std::shared_mutex* m_;
};

std::vector<at::Tensor> run(const TaskSpec& task, const std::vector<at::Tensor>& inputs, std::shared_mutex* lock,
                            std::optional<at::ScalarType> compute = std::nullopt) {
  SharedUse use(lock);
  return ref::run_reference(task, inputs, compute);
}

std::vector<at::Tensor> inputs_for(const TaskSpec& task, uint64_t seed, const at::Device& device,
                                   std::shared_mutex* lock) {
  SharedUse use(lock);
  return ref::make_inputs(task, seed, device);
}

// Largest |a - b| / (atol + rtol |b|) over the elements (0 when equal);
// infinite when shapes or dtypes differ or any element is NaN in one and not
// the other. NaN never matches, as in the judge's comparison: without this
// the NaN that max() returns was lost in std::max (NaN < x is false), so a
// graph whose ablation gives NaN (log(x) once the softplus before it is
// removed) counted as unchanged and the op as a no-op.
double tolerance_ratio(const at::Tensor& a, const at::Tensor& b, const Tolerance& tol) {
  if (a.sizes() != b.sizes()) return INFINITY;
  if (!a.is_floating_point() || !b.is_floating_point()) {
    return a.scalar_type() == b.scalar_type() && a.equal(b) ? 0.0 : INFINITY;
  }
  at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  at::Tensor ratio = (x - y).abs() / (y.abs() * tol.rtol + tol.atol);
  if (ratio.numel() == 0) return 0;
  // Where both are NaN (or the same infinity) they agree; anywhere else a NaN
  // ratio is a mismatch.
  const at::Tensor agree = (x.isnan() & y.isnan()) | (x == y);
  ratio = at::where(agree, at::zeros_like(ratio), ratio);
  if (ratio.isnan().any().item<bool>()) return INFINITY;
  return ratio.max().item<double>();
}

// The smallest share, over the outputs, of elements of `a` within the
// tolerance of `b` (1 when every element of every output is).
double share_within(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const Tolerance& tol) {
  double share = 1.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i].sizes() != b[i].sizes() || a[i].numel() == 0) continue;
    if (!a[i].is_floating_point() || !b[i].is_floating_point()) {
      share = std::min(share, a[i].eq(b[i]).to(at::kDouble).mean().item<double>());
      continue;
    }
    const at::Tensor x = a[i].to(at::kDouble), y = b[i].to(at::kDouble);
    share = std::min(share, ((x - y).abs() <= y.abs() * tol.rtol + tol.atol).to(at::kDouble).mean().item<double>());
  }
  return share;
}

double max_ratio(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const Tolerance& tol) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, tolerance_ratio(a[i], b[i], tol));
  return worst;
}

// The largest fraction of `ref`'s elements that one constant (its mean, its
// median or zero) matches within the tolerance, as the judge compares: the
// share of the output a kernel that writes that constant gets right.
double constant_match(const at::Tensor& ref, const Tolerance& tol, double* constant) {
  const at::Tensor x = ref.to(at::kDouble).reshape({-1});
  if (x.numel() == 0) return 0;
  const at::Tensor bound = x.abs() * tol.rtol + tol.atol;
  double best = -1;
  for (const double c : {x.mean().item<double>(), x.median().item<double>(), 0.0}) {
    const double share = ((x - c).abs() <= bound).to(at::kDouble).mean().item<double>();
    if (share > best) {
      best = share;
      *constant = c;
    }
  }
  return best;
}

std::optional<Rejected> check_values(const TaskSpec& task, const std::vector<at::Tensor>& outputs,
                                     const std::string& where, const FilterOptions& o) {
  const std::vector<TensorType> types = infer_outputs(task);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].is_floating_point()) continue;
    const ref::OutputSpread s = ref::measure_spread(outputs[i]);
    if (!s.all_finite()) {
      return Rejected{"nan_inf", "output " + task.outputs[i] + " has " + std::to_string(s.numel - s.finite) +
                                     " NaN/Inf of " + std::to_string(s.numel) + " elements " + where};
    }
    if (ref::is_near_constant(s, types[i].dtype)) {
      return Rejected{"near_constant", "output " + task.outputs[i] + " is near-constant " + where +
                                           " (standard deviation " + format_significant(s.std) + " at RMS " +
                                           format_significant(s.rms) + ")"};
    }
    const Tolerance tolerance = task.tolerance.value_or(Tolerance{});
    double constant = 0;
    const double share = constant_match(outputs[i], tolerance, &constant);
    if (share >= o.constant_fraction) {
      return Rejected{"constant_passes", "the constant " + format_significant(constant) + " matches " +
                                             format_significant(100 * share) + " % of output " + task.outputs[i] + " " +
                                             where + " within the task's tolerance (limit " +
                                             format_significant(100 * o.constant_fraction) + " %)"};
    }
    // Below constant_passes' 90 %, zero is still within atol of most of an
    // output this small, and a kernel's errors as large as the output pass.
    if (s.rms < tolerance.atol) {
      return Rejected{"output_magnitude", "output " + task.outputs[i] + " has RMS " + format_significant(s.rms) + " " +
                                              where + ", below the task's atol " + format_significant(tolerance.atol) +
                                              ": errors the size of the output itself would pass"};
    }
  }
  return std::nullopt;
}

// A node whose output is one value everywhere on real inputs makes
// everything upstream of it dead work (relu6(min(x, 0)) is 0 whatever the
// GEMM before it computed): a kernel can skip it. Exact equality, not the
// near-constant spread: a value that lost its low bits to rounding (x + 1e6)
// is a precision problem (reference_precision), not dead work. Every node's
// value comes from one run.
std::optional<Rejected> constant_node(const TaskSpec& task, const std::vector<at::Tensor>& inputs,
                                      std::shared_mutex* lock) {
  TaskSpec probe = task;
  probe.outputs.clear();
  for (const auto& n : task.nodes) probe.outputs.push_back(n.out);
  const std::vector<at::Tensor> values = run(probe, inputs, lock);
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].numel() < 2) continue;
    const at::Tensor flat = values[i].reshape({-1});
    if (flat.eq(flat[0]).all().item<bool>()) {
      return Rejected{"constant_node", "node " + std::to_string(i) + " (" + task.nodes[i].op +
                                           ") gives one value everywhere on real inputs: the work before it is dead"};
    }
  }
  return std::nullopt;
}

double now_ms(bool thread_cpu) {
  if (thread_cpu) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Fastest of the timed runs: other work only ever adds time to a run, so the
// minimum is the statistic that load moves least. On the CPU: this thread's
// CPU time with one ATen thread, as the judge times the CPU reference; on a
// GPU: wall time to a completed device copy, with the device held
// exclusively. It annotates the task and rejects only a gross cost-model miss
// (FilterOptions::far_outside).
double time_eager(const TaskSpec& task, const std::vector<at::Tensor>& inputs, const FilterOptions& o) {
  const bool gpu = !o.device.is_cpu();
  std::unique_lock<std::shared_mutex> exclusive;
  if (gpu && o.device_lock) exclusive = std::unique_lock<std::shared_mutex>(*o.device_lock);
  auto once = [&] {
    std::vector<at::Tensor> out = ref::run_reference(task, inputs);
    if (gpu) (void)out[0].reshape({-1}).narrow(0, 0, 1).cpu();
  };
  once();  // warm-up (allocator, library handles, kernel selection)
  std::vector<double> samples;
  for (int i = 0; i < std::max(1, o.timing_runs); ++i) {
    const double t0 = now_ms(!gpu);
    once();
    samples.push_back(now_ms(!gpu) - t0);
  }
  return *std::min_element(samples.begin(), samples.end());
}

}  // namespace

void prepare_device(const at::Device& device) {
  if (device.is_cpu()) return;
  (void)at::globalContext().defaultGenerator(device);
  const at::Tensor x = at::randn({64, 64}, at::TensorOptions().device(device));
  const at::Tensor image = at::randn({1, 4, 16, 16}, at::TensorOptions().device(device));
  const at::Tensor weight = at::randn({4, 4, 3, 3}, at::TensorOptions().device(device));
  (void)at::matmul(x, x).sum().item<float>();
  (void)at::conv2d(image, weight).sum().item<float>();
}

namespace {

// The outputs' magnitude scales the tolerance; outputs too large to scale
// for are a blow-up.
std::optional<Rejected> scale_tolerance(TaskSpec& task, const std::vector<at::Tensor>& out0, const FilterOptions& o,
                                        FilterVerdict* verdict) {
  verdict->atol_scale = atol_scale_for(out0);
  task.tolerance = magnitude_tolerance(task.tolerance.value_or(Tolerance{}), out0);
  if (verdict->atol_scale > o.max_atol_scale) {
    return Rejected{"output_magnitude", "the outputs' typical magnitude needs atol x " +
                                            format_significant(verdict->atol_scale) + " (limit " +
                                            format_significant(o.max_atol_scale) +
                                            "): values that large are a blow-up, not a kernel to write"};
  }
  return std::nullopt;
}

// Each activation redrawn alone, the parameters held: seed_insensitive
// redraws weights too, so an output that only the weights move (a bias
// after a dead GEMM) would pass it.
std::optional<Rejected> activation_insensitive(const TaskSpec& task, const std::vector<at::Tensor>& in0,
                                               const std::vector<at::Tensor>& in1, const std::vector<at::Tensor>& out0,
                                               const Tolerance& tol, const FilterOptions& o, std::shared_mutex* lock) {
  for (size_t j = 0; j < task.inputs.size(); ++j) {
    if (in1[j].equal(in0[j])) continue;  // an init that ignores the seed (arange, ones)
    std::vector<at::Tensor> mixed = in0;
    mixed[j] = in1[j];
    const double share = share_within(run(task, mixed, lock), out0, tol);
    if (share >= o.insensitive_share) {
      return Rejected{"activation_insensitive",
                      "redrawing input " + task.inputs[j].name + " with the parameters held leaves " +
                          format_significant(100 * share) + " % of the outputs within the tolerance (limit " +
                          format_significant(100 * o.insensitive_share) + " %): a kernel need not read it"};
    }
  }
  return std::nullopt;
}

std::optional<Rejected> shape_variant_fails(const TaskSpec& task, const FilterOptions& o, std::shared_mutex* lock) {
  for (size_t v = 0; v < task.shape_variants.size(); ++v) {
    const TaskSpec tv = task.with_variant(v);
    const std::string where = "(shape variant " + std::to_string(v + 1) + ")";
    std::vector<at::Tensor> out;
    try {
      out = run(tv, inputs_for(tv, 0, o.device, lock), lock);
    } catch (const std::exception& e) {
      return Rejected{"fails_to_run", std::string(e.what()).substr(0, 300) + " " + where};
    }
    if (auto r = check_values(tv, out, where, o)) return r;
  }
  return std::nullopt;
}

// An op whose removal (its input passed through in its place) leaves the
// outputs unchanged.
std::optional<Rejected> noop_op(const TaskSpec& task, const std::vector<at::Tensor>& in0,
                                const std::vector<at::Tensor>& out0, const Tolerance& tol, const FilterOptions& o,
                                std::shared_mutex* lock) {
  for (size_t i = 0; i < task.nodes.size(); ++i) {
    for (size_t slot = 0; slot < task.nodes[i].in.size(); ++slot) {
      const std::optional<TaskSpec> ablated = without_node(task, i, slot);
      if (!ablated) continue;
      std::vector<at::Tensor> out;
      try {
        out = run(*ablated, in0, lock);
      } catch (const std::exception&) {
        continue;  // the graph without the op does not run: the op matters
      }
      if (max_ratio(out, out0, tol) <= o.same_fraction) {
        return Rejected{"op_is_noop", "removing node " + std::to_string(i) + " (" + task.nodes[i].op +
                                          ") leaves the outputs unchanged within the tolerance"};
      }
    }
  }
  return std::nullopt;
}

// Times the eager reference into `eager_ms`; far outside the window means
// the cost model missed.
std::optional<Rejected> outside_runtime_window(const TaskSpec& task, const std::vector<at::Tensor>& in0,
                                               const FilterOptions& o, double* eager_ms) {
  *eager_ms = time_eager(task, in0, o);
  const double far = std::max(1.0, o.far_outside);
  const double far_lo = o.window.lo_ms / far, far_hi = o.window.hi_ms * far;
  if (*eager_ms < far_lo || *eager_ms > far_hi) {
    return Rejected{"runtime_window", "eager reference takes " + format_significant(*eager_ms) +
                                          " ms, more than a factor " + format_significant(far) +
                                          " outside the window [" + format_significant(o.window.lo_ms) + ", " +
                                          format_significant(o.window.hi_ms) + "] ms: the cost model missed it"};
  }
  return std::nullopt;
}

// `task` is the caller's copy: its tolerance is scaled to the outputs'
// magnitude (FilterOptions::scale_tolerance) before any check uses it.
std::optional<Rejected> filter(TaskSpec& task, const FilterOptions& o, FilterVerdict* verdict) {
  std::shared_mutex* lock = o.device.is_cpu() ? nullptr : o.device_lock;
  std::vector<at::Tensor> in0, out0;
  try {
    in0 = inputs_for(task, 0, o.device, lock);
    out0 = run(task, in0, lock);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (what.size() > 300) what = what.substr(0, 300) + "...";
    return Rejected{"fails_to_run", what};
  }
  if (o.scale_tolerance) {
    if (auto r = scale_tolerance(task, out0, o, verdict)) return r;
  }
  verdict->tolerance = task.tolerance.value_or(Tolerance{});
  const Tolerance tol = verdict->tolerance;
  if (auto r = check_values(task, out0, "(seed 0)", o)) return r;
  if (auto r = constant_node(task, in0, lock)) return r;

  if (auto why = nondeterminism(out0, run(task, in0, lock), tol, o)) return Rejected{"nondeterministic", *why};

  const std::vector<at::Tensor> in1 = inputs_for(task, 1, o.device, lock);
  const std::vector<at::Tensor> out1 = run(task, in1, lock);
  if (auto r = check_values(task, out1, "(seed 1)", o)) return r;
  if (max_ratio(out1, out0, tol) <= o.same_fraction) {
    return Rejected{"seed_insensitive", "outputs for input seeds 0 and 1 agree within the tolerance"};
  }
  if (auto r = activation_insensitive(task, in0, in1, out0, tol, o, lock)) return r;

  const double precision = max_ratio(out0, run(task, in0, lock, at::kDouble), tol);
  if (precision > o.precision_fraction) {
    return Rejected{"reference_precision", "the reference differs from its float64 evaluation by " +
                                               format_significant(precision) + " of the tolerance (limit " +
                                               format_significant(o.precision_fraction) + ")"};
  }
  if (auto r = shape_variant_fails(task, o, lock)) return r;
  if (auto r = noop_op(task, in0, out0, tol, o, lock)) return r;
  return outside_runtime_window(task, in0, o, &verdict->eager_ms);
}

}  // namespace

std::optional<std::string> nondeterminism(const std::vector<at::Tensor>& first, const std::vector<at::Tensor>& second,
                                          const Tolerance& tol, const FilterOptions& options) {
  const double apart = max_ratio(second, first, tol);
  if (apart <= options.determinism_fraction) return std::nullopt;
  return "two runs on the same inputs differ by " + format_significant(apart) + " of the tolerance (limit " +
         format_significant(options.determinism_fraction) + ")";
}

const std::vector<std::string>& rejection_reasons() {
  static const std::vector<std::string> kReasons = {
      "compose_invalid",     "shape_search",  "memory_cap",       "near_roofline",
      "fails_to_run",        "nan_inf",       "nondeterministic", "near_constant",
      "constant_passes",     "constant_node", "seed_insensitive", "activation_insensitive",
      "reference_precision", "op_is_noop",    "runtime_window",   "judge_check",
      "judge_error",         "duplicate",     "contaminated",     "output_magnitude",
      "headroom_range",
  };
  return kReasons;
}

std::optional<TaskSpec> without_node(const TaskSpec& task, size_t index, size_t input_slot) {
  const GraphNode& node = task.nodes.at(index);
  if (input_slot >= node.in.size()) return std::nullopt;
  const std::map<std::string, TensorType> types = infer_graph(task);
  const TensorType& in = types.at(node.in[input_slot]);
  const TensorType& out = types.at(node.out);
  if (in.shape != out.shape || in.dtype != out.dtype) return std::nullopt;
  const std::string replacement = node.in[input_slot];
  bool is_input = task.find_tensor(replacement) != nullptr;
  TaskSpec t = task;
  t.nodes.erase(t.nodes.begin() + static_cast<std::ptrdiff_t>(index));
  for (auto& n : t.nodes) {
    for (auto& v : n.in) {
      if (v == node.out) v = replacement;
    }
  }
  for (auto& o : t.outputs) {
    if (o != node.out) continue;
    if (is_input) {
      // An output must be a node's: keep the value through a copy.
      t.nodes.push_back({"contiguous", {replacement}, node.out, json::object()});
    } else {
      o = replacement;
    }
  }
  if (t.nodes.empty()) t.nodes.push_back({"contiguous", {replacement}, node.out, json::object()});
  return t;
}

double atol_scale_for(const std::vector<at::Tensor>& outputs) {
  double typical = 0;
  for (const at::Tensor& out : outputs) {
    if (!out.is_floating_point() || out.numel() == 0) continue;
    const at::Tensor x = out.to(at::kDouble).reshape({-1}).abs();
    // Exact zeros (relu, tril, a mask) say nothing of the magnitude of what
    // was summed; the median, not the RMS, so that a heavy tail (exp of a
    // wide value) does not loosen atol for the bulk of the elements.
    const at::Tensor kept = x.masked_select(x.isfinite() & (x > 0));
    if (kept.numel() == 0) continue;
    typical = std::max(typical, kept.median().item<double>());
  }
  if (!(typical > 1.0) || !std::isfinite(typical)) return 1.0;
  return std::exp2(std::round(std::log2(typical)));
}

Tolerance magnitude_tolerance(const Tolerance& base, const std::vector<at::Tensor>& outputs) {
  Tolerance t = base;
  t.atol = base.atol * atol_scale_for(outputs);
  return t;
}

FilterVerdict run_filters(const TaskSpec& task, const FilterOptions& options) {
  FilterVerdict v;
  v.tolerance = task.tolerance.value_or(Tolerance{});
  std::optional<Rejected> r;
  try {
    TaskSpec scaled = task;
    r = filter(scaled, options, &v);
  } catch (const std::exception& e) {
    r = Rejected{"fails_to_run", std::string(e.what()).substr(0, 300)};
  }
  if (r) {
    v.reason = r->reason;
    v.detail = r->detail;
  } else {
    v.passed = true;
  }
  v.measured_in_window = v.eager_ms >= options.window.lo_ms && v.eager_ms <= options.window.hi_ms;
  return v;
}

}  // namespace kforge::synth
