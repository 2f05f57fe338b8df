#include "judge/reference_request.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ipc/deadline.h"
#include "judge/sample_stats.h"
#include "judge/task_fit.h"
#include "judge/timing_inputs.h"
#include "judge/timing_protocol.h"
#include "kforge/core/elapsed.h"
#include "kforge/core/error.h"
#include "kforge/core/number_text.h"
#include "kforge/core/op_registry.h"
#include "kforge/core/output_spread.h"
#include "kforge/core/reference.h"

namespace kforge::judge {
namespace {

using Clock = std::chrono::steady_clock;

// The check's inputs: verification's first seed.
constexpr uint64_t kCheckSeed = 0;

// Thrown inside the probe for a task that cannot be judged; becomes the report's problem.
struct TaskInvalid {
  std::string problem;
};

// "the base shape (x: [64, 64])", "shape variant 1 (x: [128, 64])": the
// task's inputs only, since variants change inputs and params keep theirs.
std::string case_description(int variant, const TaskSpec& task) {
  std::string shapes;
  for (const auto& in : task.inputs)
    shapes += (shapes.empty() ? "" : ", ") + in.name + ": " + shape_to_string(in.shape);
  return (variant < 0 ? std::string("the base shape") : "shape variant " + std::to_string(variant)) + " (" + shapes +
         ")";
}

std::string node_name(const TaskSpec& task, size_t i) {
  const GraphNode& n = task.nodes[i];
  return "node " + std::to_string(i) + " (" + n.op + " -> " + n.out + ")";
}

// What the check measures of one node's output.
struct NodeStats {
  ref::OutputSpread spread;
  int64_t nan = 0;
  // Tensors of fewer than two elements (a full reduction) have no spread to
  // measure; they are checked for NaN/Inf only.
  bool measurable = false;
  bool near_constant = false;
};

NodeStats measure(const at::Tensor& t, DType dtype) {
  NodeStats s;
  s.spread = ref::measure_spread(t);
  if (at::isFloatingType(t.scalar_type()) && t.numel() > 0) s.nan = at::isnan(t).sum().item<int64_t>();
  s.measurable = s.spread.numel >= 2;
  s.near_constant = s.measurable && ref::is_near_constant(s.spread, dtype);
  return s;
}

// For every node, the nodes whose outputs it is computed from (itself included).
std::vector<std::set<size_t>> node_ancestors(const TaskSpec& task) {
  std::map<std::string, size_t> producer;
  std::vector<std::set<size_t>> ancestors(task.nodes.size());
  for (size_t i = 0; i < task.nodes.size(); ++i) {
    ancestors[i].insert(i);
    for (const auto& in : task.nodes[i].in) {
      auto p = producer.find(in);
      if (p != producer.end()) ancestors[i].insert(ancestors[p->second].begin(), ancestors[p->second].end());
    }
    producer[task.nodes[i].out] = i;
  }
  return ancestors;
}

std::string nonfinite_phrase(const NodeStats& s) {
  const int64_t bad = s.spread.numel - s.spread.finite;
  std::string what = s.nan == bad ? "NaN"
                     : s.nan == 0 ? "infinite"
                                  : "NaN or infinite (" + std::to_string(s.nan) + " NaN)";
  return std::to_string(bad) + " of " + std::to_string(s.spread.numel) + " elements are " + what;
}

std::string spread_phrase(const NodeStats& s) {
  return std::string(s.spread.std == 0 ? "constant" : "near-constant") + " (standard deviation " +
         format_significant(s.spread.std) + " at rms " + format_significant(s.spread.rms) + " over " +
         std::to_string(s.spread.finite) + " elements)";
}

// Every node's output of one shape case, from the same graph with every node's
// output kept, so that a problem can be traced to the node that first produced
// it. A reference that fails is the task's fault: TaskInvalid.
std::vector<at::Tensor> run_every_node(const TaskSpec& task, JudgeDevice* device, const std::string& where,
                                       std::map<std::string, TensorType>* types, json* entry) {
  TaskSpec every = task;
  every.outputs.clear();
  for (const auto& n : task.nodes) every.outputs.push_back(n.out);
  try {
    *types = infer_graph(every);
    return ref::run_reference(every, ref::make_inputs(task, kCheckSeed, device->device()));
  } catch (const InputError& e) {
    // Shape inference, or ATen rejecting a node at run time (the message
    // names the node), or running out of memory inside one.
    (*entry)["error"] = e.what();
    throw TaskInvalid{"the reference failed on " + where + ": " + e.what() +
                      "; no candidate could be judged against it"};
  } catch (const c10::Error& e) {
    (*entry)["error"] = e.what_without_backtrace();
    throw TaskInvalid{"the reference failed on " + where + ": " + e.what_without_backtrace() +
                      "; no candidate could be judged against it"};
  } catch (const std::bad_alloc&) {
    (*entry)["error"] = "out of memory";
    throw TaskInvalid{"the reference ran out of memory on " + where + "; no candidate could be judged against it"};
  }
}

// Each node's statistics, in graph order; the report's "nodes" entry.
std::vector<NodeStats> node_statistics(const TaskSpec& task, const std::vector<at::Tensor>& values,
                                       const std::map<std::string, TensorType>& types, json* entry) {
  const std::set<std::string> task_outputs(task.outputs.begin(), task.outputs.end());
  std::vector<NodeStats> stats;
  json nodes = json::array();
  for (size_t i = 0; i < task.nodes.size(); ++i) {
    const GraphNode& n = task.nodes[i];
    stats.push_back(measure(values[i], types.at(n.out).dtype));
    const NodeStats& s = stats.back();
    nodes.push_back({{"node", i},
                     {"op", n.op},
                     {"out", n.out},
                     {"output", task_outputs.count(n.out) > 0},
                     {"numel", s.spread.numel},
                     {"finite", s.spread.finite},
                     {"nan", s.nan},
                     {"std", s.spread.std},
                     {"rms", s.spread.rms},
                     {"near_constant", s.measurable ? json(s.near_constant) : json(nullptr)}});
  }
  (*entry)["nodes"] = nodes;
  return stats;
}

// Task outputs in task order; the blame goes to the first node, in graph
// order, among those the output is computed from, that shows the problem.
void blame_output_problems(const TaskSpec& task, const std::vector<NodeStats>& stats, const std::string& where) {
  const std::vector<std::set<size_t>> ancestors = node_ancestors(task);
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < task.nodes.size(); ++i) producer[task.nodes[i].out] = i;
  for (const auto& out : task.outputs) {
    const size_t o = producer.at(out);
    const NodeStats& so = stats[o];
    auto blame = [&](auto&& has_problem) {
      for (size_t a : ancestors[o]) {
        if (has_problem(stats[a])) return a;  // std::set iterates in graph order
      }
      return o;
    };
    if (so.spread.numel == 0) {
      throw TaskInvalid{node_name(task, o) + ": task output " + out + " has no elements on " + where +
                        "; there is nothing to compute or compare"};
    }
    if (!so.spread.all_finite()) {
      const size_t b = blame([](const NodeStats& s) { return !s.spread.all_finite(); });
      const std::string tail = "every candidate would be judged against a NaN reference";
      throw TaskInvalid{
          node_name(task, b) + ": " + nonfinite_phrase(stats[b]) + " on " + where + "; " +
          (b == o ? "it is task output " + out + ", so " + tail
                  : "task output " + out + " is computed from it (" + nonfinite_phrase(so) + "), so " + tail)};
    }
    if (so.near_constant) {
      const size_t b = blame([](const NodeStats& s) { return s.near_constant; });
      const std::string tail = "a kernel that writes a constant would pass verification";
      throw TaskInvalid{
          node_name(task, b) + ": the output is " + spread_phrase(stats[b]) + " on " + where + "; " +
          (b == o ? "it is task output " + out + ", so " + tail
                  : "task output " + out + " is computed from it and is " + spread_phrase(so) + ", so " + tail)};
    }
  }
}

// Checks one shape case; fills `entry` with every node's statistics and
// throws TaskInvalid naming the node behind the first problem.
void check_case(int variant, const TaskSpec& task, JudgeDevice* device, json* entry) {
  const std::string where = case_description(variant, task);
  (*entry)["variant"] = variant;
  (*entry)["label"] = variant < 0 ? std::string("base shape") : "shape variant " + std::to_string(variant);
  json shapes = json::object();
  for (const auto& in : task.kernel_inputs()) shapes[in.name] = in.shape;
  (*entry)["shapes"] = shapes;
  std::map<std::string, TensorType> types;
  std::vector<NodeStats> stats;
  {
    // The node outputs are freed before the blame is worked out.
    const std::vector<at::Tensor> values = run_every_node(task, device, where, &types, entry);
    stats = node_statistics(task, values, types, entry);
  }
  blame_output_problems(task, stats, where);
}

json time_reference(const TaskSpec& task, const env::EvalOptions& options, JudgeDevice* device,
                    ipc::Deadline deadline) {
  // The clocks of the speedup's denominator (timing.cpp): CPU time where the
  // work is host CPU time, else the device's own clock.
  const bool use_cpu = device->work_is_host_cpu_time();
  const bool device_clock = !use_cpu && device->runner_times_on_device();
  const uint64_t seed = timing_seed();
  TimingInputs fresh(task, options.timing_input_sets, seed, device->device());
  std::vector<double> primary, wall;
  SamplingSchedule schedule(options);
  std::string stop_reason;
  while (true) {
    if (deadline.expired()) {
      stop_reason = kStopEvalTimeout;
      break;
    }
    const std::vector<at::Tensor> inputs = fresh.round(static_cast<uint64_t>(schedule.rounds()));
    std::vector<at::Tensor> outputs;
    const ReferenceTimes t = run_timed_reference(device, task, inputs, &outputs);
    if (!schedule.finish_round()) continue;
    primary.push_back(t.primary(use_cpu));
    wall.push_back(t.wall_ms);
    const SampleSummary s = summarize(primary);
    const StopReason stop = schedule.check(s, s);
    if (stop != StopReason::kContinue) {
      stop_reason = stop_reason_name(stop);
      break;
    }
  }
  json timing = summary_json(summarize(primary));
  timing["timer"] = timer_name(use_cpu, device_clock);
  timing["stop_reason"] = stop_reason;
  timing["warmup_rounds"] = schedule.warmup_rounds();
  if (use_cpu || device_clock) timing["wall"] = summary_json(summarize(wall));
  timing["input_sets"] = fresh.pool_size();
  timing["timing_seed"] = seed;
  timing["cache_flush_bytes"] = device->flush_bytes();
  timing["elapsed_ms"] = schedule.elapsed_ms();
  json shapes = json::object();
  for (const auto& in : task.kernel_inputs()) shapes[in.name] = in.shape;
  timing["shapes"] = shapes;
  timing["clocks"] = device->clocks();
  timing["device"] = device->name();
  return timing;
}

}  // namespace

env::ReferenceReport probe_reference(const env::ReferenceRequest& request, JudgeDevice* device,
                                     ReferenceCache* references) {
  const auto start = Clock::now();
  const ipc::Deadline deadline = ipc::Deadline::after_ms(request.options.eval_timeout_ms);
  env::ReferenceReport report;
  report.device = device->name();
  report.status = env::ReferenceStatus::kOk;
  const TaskSpec& task = request.task;
  try {
    // Before anything is allocated: a task too large or too slow for this
    // judge is refused with figures (task_fit.h). The check also asks
    // whether a candidate could be judged (reset's check is what lets
    // candidates be charged for the task).
    for (auto [asked, work] :
         {std::pair{request.check, JudgeWork::kReferenceCheck}, std::pair{request.check, JudgeWork::kEvaluation},
          std::pair{request.time, JudgeWork::kReferenceTiming}}) {
      if (!asked) continue;
      const TaskFit fit = check_task_fit(task, work, request.options, *device);
      if (!fit.fits()) throw TaskInvalid{fit.problem};
      if (references) references->set_bound(std::min(references->bound(), fit.reference_cache_bytes));
    }
    if (request.check) {
      const auto phase = Clock::now();
      const int variants = static_cast<int>(task.shape_variants.size());
      for (int v = -1; v < variants; ++v) {
        // The bound above is a lower bound; a reference that is slower than
        // it by far (a CPU without vector units, an op ATen runs slowly)
        // is stopped here, between cases, with what it took, before the
        // environment's deadline turns it into a system error.
        const double elapsed = ms_since(phase);
        if (v >= 0 && elapsed > request.options.eval_timeout_ms / 2) {
          throw TaskInvalid{"the task's reference is too slow for a judge on the " + device->backend() +
                            " backend: it took " + format_duration(elapsed) + " for " + std::to_string(v + 1) + " of " +
                            std::to_string(variants + 1) + " shape cases, more than half of the " +
                            format_duration(request.options.eval_timeout_ms) +
                            " a request may take (eval_timeout_ms): shrink its shapes" +
                            (device->backend() == "cpu" ? " or check it with --backend cuda" : "")};
        }
        report.nodes.push_back(json::object());
        try {
          check_case(v, v < 0 ? task : task.with_variant(static_cast<size_t>(v)), device, &report.nodes.back());
        } catch (const InputError& e) {
          // with_variant refusing the variant: the task is not well formed.
          report.nodes.back()["error"] = e.what();
          throw TaskInvalid{e.what()};
        }
      }
      report.phase_ms["check"] = ms_since(phase);
    }
    if (request.time) {
      const auto phase = Clock::now();
      try {
        report.timing = time_reference(task, request.options, device, deadline);
      } catch (const InputError& e) {
        throw TaskInvalid{"the reference failed while being timed on the base shape: " + std::string(e.what())};
      } catch (const c10::Error& e) {
        throw TaskInvalid{"the reference failed while being timed on the base shape: " +
                          std::string(e.what_without_backtrace())};
      } catch (const std::bad_alloc&) {
        throw TaskInvalid{"the reference ran out of memory while being timed on the base shape"};
      }
      report.phase_ms["time"] = ms_since(phase);
    }
  } catch (const TaskInvalid& invalid) {
    report.status = env::ReferenceStatus::kInvalid;
    report.problem = invalid.problem;
    report.timing.reset();
  }
  report.phase_ms["total"] = ms_since(start);
  return report;
}

}  // namespace kforge::judge
