#include "judge/task_fit.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "kforge/core/op_registry.h"

namespace kforge::judge {
namespace {

double type_bytes(const TensorType& t) {
  return static_cast<double>(t.numel()) * static_cast<double>(dtype_size(t.dtype));
}

// The tensors of one shape case, by role.
struct CaseBytes {
  double kernel_inputs = 0;   // inputs and params
  double outputs = 0;         // the task's outputs
  double node_outputs = 0;    // every node's output (outputs included)
  double largest_output = 0;  // the largest single node output
  double intermediates = 0;   // node outputs that are not task outputs
};

CaseBytes case_bytes(const TaskSpec& task) {
  const std::map<std::string, TensorType> types = infer_graph(task);
  CaseBytes c;
  for (const auto& t : task.kernel_inputs()) c.kernel_inputs += static_cast<double>(t.nbytes());
  for (const auto& o : task.outputs) c.outputs += type_bytes(types.at(o));
  for (const auto& n : task.nodes) {
    const double b = type_bytes(types.at(n.out));
    c.node_outputs += b;
    c.largest_output = std::max(c.largest_output, b);
    if (std::find(task.outputs.begin(), task.outputs.end(), n.out) == task.outputs.end()) c.intermediates += b;
  }
  return c;
}

// What a candidate may need of its own beside its arena: an op-by-op one
// keeps every intermediate (torch_ext's torch::empty, cuda's cudaMallocAsync),
// plus a library's workspace (cuBLAS takes up to 32 MiB on Hopper).
constexpr double kCandidateWorkspaceBytes = double(uint64_t{64} << 20);
double candidate_floor(const CaseBytes& c) { return c.intermediates + kCandidateWorkspaceBytes; }

// What the judge holds at once for one case. Counted from what each piece of
// work keeps alive (measured: bench/exec's judge memory figures in
// docs/execution.md, "Tasks too large for a judge"):
//   check:      the inputs, every node's output (all kept for measurement),
//               and the measurement's temporaries (a float64 copy of the
//               largest output, so 2x its float32 bytes);
//   timing:     the inputs, the graph's outputs while it runs, and the
//               timing input sets (timing_input_sets copies of the inputs);
//   evaluation: the shared arena (inputs and outputs), then the larger of
//               its two phases: verification (the pristine inputs kept to
//               detect mutation, the reference's inputs and node outputs, a
//               float64 reference doubling that part, and the comparison's
//               temporaries, 2x the outputs) and timing (its pool of
//               max(2, timing_input_sets) input sets, timing_inputs.h, beside
//               each round's inputs, the timed reference's node outputs and
//               the timed outputs' comparison).
double need_bytes(const CaseBytes& c, JudgeWork work, const env::EvalOptions& o) {
  switch (work) {
    case JudgeWork::kReferenceCheck:
      return c.kernel_inputs + c.node_outputs + 2 * c.largest_output;
    case JudgeWork::kReferenceTiming:
      return c.kernel_inputs * (1 + std::max(1, o.timing_input_sets)) + c.node_outputs;
    case JudgeWork::kEvaluation: {
      const double arena = c.kernel_inputs + c.outputs;
      const double reference = c.kernel_inputs + c.node_outputs;
      const double comparison = 2 * c.outputs;
      const double verification = c.kernel_inputs + reference * (o.float64_reference ? 3 : 1) + comparison;
      const double timing = c.kernel_inputs * std::max(2, o.timing_input_sets) + reference + comparison;
      return arena + std::max(verification, timing);
    }
  }
  return 0;
}

// Reference runs the work needs at least: one per case for the check, the
// minimum sample count for timing, one per seed and case for verification.
double reference_runs(JudgeWork work, const env::EvalOptions& o, size_t cases) {
  switch (work) {
    case JudgeWork::kReferenceCheck:
      return static_cast<double>(cases);
    case JudgeWork::kReferenceTiming:
      return std::max(1, o.min_samples);
    case JudgeWork::kEvaluation:
      return static_cast<double>(std::max(1, o.seeds)) * static_cast<double>(cases);
  }
  return 1;
}

const char* work_name(JudgeWork work) {
  switch (work) {
    case JudgeWork::kReferenceCheck:
      return "checking its reference";
    case JudgeWork::kReferenceTiming:
      return "timing its reference";
    case JudgeWork::kEvaluation:
      return "judging a candidate";
  }
  return "";
}

}  // namespace

std::string format_duration(double ms) {
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof(buf), "%.0f ms", ms);
  } else {
    std::snprintf(buf, sizeof(buf), ms < 10000 ? "%.1f s" : "%.0f s", ms / 1000);
  }
  return buf;
}

std::string format_bytes(double bytes) {
  char buf[32];
  if (bytes >= double(uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / double(uint64_t{1} << 30));
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f MiB", bytes / double(uint64_t{1} << 20));
  }
  return buf;
}

namespace {

// The memory verdict against a lane's budget (lane_memory_budget.h): what
// the work needs, what the lane has, which keys change it.
std::string lane_problem(const TaskFit& fit, JudgeWork work, const std::string& largest_case,
                         const LaneMemoryBudget& lane) {
  std::string need = format_bytes(static_cast<double>(fit.need_bytes)) + " of device memory (" + largest_case;
  if (work == JudgeWork::kEvaluation) {
    need += ": " + format_bytes(static_cast<double>(fit.judge_bytes)) + " for the judge's tensors and " +
            std::to_string(kCandidateCopies) + " x " + format_bytes(static_cast<double>(fit.candidate_floor_bytes)) +
            " for the candidate's own intermediates and workspace, in its runner and its profiler runner";
  }
  return "the task is too large for a judge on the cuda backend: " + std::string(work_name(work)) + " needs about " +
         need + "), and a lane on this " + lane.device_name + " has " +
         format_bytes(static_cast<double>(lane.task_bytes())) + " for tasks (" + lane.describe() +
         "): shrink its shapes, or give each lane more with placement.lane_device_memory_mib (or fewer "
         "placement.lanes_per_device)";
}

}  // namespace

TaskFit check_task_fit(const TaskSpec& task, JudgeWork work, const env::EvalOptions& options,
                       const JudgeDevice& device) {
  TaskFit fit;
  // The request's own limit (tests, tools) wins over the lane's budget.
  const std::optional<LaneMemoryBudget> lane =
      options.judge_memory_limit_bytes > 0 ? std::nullopt : device.lane_memory();
  fit.limit_bytes = options.judge_memory_limit_bytes > 0 ? options.judge_memory_limit_bytes
                    : lane                               ? lane->task_bytes()
                                                         : device.task_memory_bytes();
  fit.limit_ms = options.eval_timeout_ms;
  const size_t cases = 1 + task.shape_variants.size();
  double need = 0, judge = 0, floor = 0, largest_case_ms = 0;
  std::string largest_case;
  const JudgeDevice::PeakRates peak = device.peak_rates();
  for (size_t i = 0; i < cases; ++i) {
    const TaskSpec one = i == 0 ? task : task.with_variant(i - 1);
    const CaseBytes bytes = case_bytes(one);
    const double case_judge = need_bytes(bytes, work, options);
    // With a lane budget, the candidate's own memory is the lane's too.
    const double case_floor = lane && work == JudgeWork::kEvaluation ? candidate_floor(bytes) : 0;
    judge = std::max(judge, case_judge);
    floor = std::max(floor, case_floor);
    if (case_judge + kCandidateCopies * case_floor > need) {
      need = case_judge + kCandidateCopies * case_floor;
      largest_case = i == 0 ? "the base shape" : "shape variant " + std::to_string(i - 1);
    }
    const WorkEstimate w = estimate_work(one);
    largest_case_ms =
        std::max(largest_case_ms, 1000 * std::max(w.flops / peak.flops_per_s, w.bytes / peak.bytes_per_s));
  }
  // The judge's largest case and the candidate's largest case may differ;
  // both stay in memory for the whole request.
  need = std::max(need, judge + kCandidateCopies * floor);
  fit.need_bytes = static_cast<uint64_t>(need);
  fit.judge_bytes = static_cast<uint64_t>(judge);
  fit.candidate_floor_bytes = static_cast<uint64_t>(floor);
  // Every run at the largest case's time: a lower bound only up to the
  // mix of cases, which is close enough for a refusal this coarse.
  fit.min_reference_ms = largest_case_ms * reference_runs(work, options, cases);
  const std::string backend = device.backend();
  if (fit.limit_bytes > 0 && need > static_cast<double>(fit.limit_bytes)) {
    fit.problem = lane ? lane_problem(fit, work, largest_case, *lane)
                       : "the task is too large for a judge on the " + backend + " backend: " + work_name(work) +
                             " needs about " + format_bytes(need) + " of memory (" + largest_case +
                             "), and the judge may use " + format_bytes(static_cast<double>(fit.limit_bytes)) +
                             (options.judge_memory_limit_bytes > 0 ? " (judge_memory_limit_bytes)" : "") +
                             ": shrink its shapes" + (backend == "cpu" ? " or check it with --backend cuda" : "");
  } else if (fit.min_reference_ms > fit.limit_ms) {
    fit.problem = "the task's reference is too slow for a judge on the " + backend + " backend: " + work_name(work) +
                  " takes at least " + format_duration(fit.min_reference_ms) +
                  " even at the device's peak rates, and a request may take " + format_duration(fit.limit_ms) +
                  " (eval_timeout_ms): shrink its shapes" +
                  (backend == "cpu" ? " or check it with --backend cuda" : "");
  }
  if (fit.fits()) {
    const uint64_t slack = fit.limit_bytes > fit.need_bytes ? fit.limit_bytes - fit.need_bytes : 0;
    fit.reference_cache_bytes =
        std::min(options.reference_cache_bytes, fit.limit_bytes > 0 ? slack / 2 : options.reference_cache_bytes);
  }
  if (lane && work == JudgeWork::kEvaluation && fit.fits())
    fit.candidate_bytes = lane->candidate_bytes(fit.judge_bytes + fit.reference_cache_bytes);
  return fit;
}

}  // namespace kforge::judge
