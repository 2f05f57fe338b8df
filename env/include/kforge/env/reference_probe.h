// Running a task's reference alone on the judge's device, with no candidate:
// the `reference` request of the judge (docs/execution.md, "Reference
// requests").
//
//   check: does the task make sense to judge? For the base shape and every
//          shape variant, seed-0 inputs, every node's output is kept and
//          measured (numel, finite, NaN, std, rms, near-constant by
//          kforge/core/output_spread.h). A task output with NaN/Inf, a
//          near-constant task output, or a reference that throws makes the
//          task `invalid`, with a message naming the node that first
//          produced the problem. No solution can pass such a task, so it is
//          refused before any candidate is charged for it (task check, reset,
//          serve --tasks).
//   time:  the reference timed alone on the base shape, with exactly the
//          clock, cache flush, warm-up and stopping rule of the speedup's
//          denominator (judge/timing_protocol.h): what eager baselines of
//          synthesized tasks record.
#pragma once

#include <optional>
#include <string>

#include "kforge/core/document.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/eval.h"

namespace kforge::env {

struct ReferenceRequest {
  TaskSpec task;
  bool check = true;
  bool time = false;
  // Timing knobs (warmup_ms, min/max_samples, target_rse, max_time_ms,
  // timing_input_sets) and eval_timeout_ms, the deadline of the request.
  EvalOptions options;
};

json to_json(const ReferenceRequest& r);
// Throws InputError naming the field for malformed requests.
ReferenceRequest reference_request_from_json(const json& j);

enum class ReferenceStatus {
  kOk,       // every check passed (and the reference was timed, if asked)
  kInvalid,  // the task cannot be judged: `problem` says why, naming the node
  kError,    // the system could not answer (judge died, tools missing); says nothing about the task
};
const std::string& reference_status_name(ReferenceStatus status);  // "ok", "invalid", "error"

struct ReferenceReport {
  ReferenceStatus status = ReferenceStatus::kError;
  // invalid: e.g. "node 1 (log -> t1): 2048 of 4096 elements are NaN on the
  // base shape (x: [64, 64]); ..."; error: "system error: ...".
  std::string problem;
  // One entry per shape case checked, base first:
  //   {"variant": -1, "label": "base shape", "shapes": {"x": [64, 64]},
  //    "nodes": [{"node": 0, "op", "out", "output": bool, "numel", "finite",
  //               "nan", "std", "rms", "near_constant": bool|null}, ...]}
  // (near_constant is null for tensors of fewer than two elements: a full
  // reduction has no spread to measure). A case whose reference threw has
  // "error" instead of "nodes".
  json nodes = json::array();
  // When timed: {"timer", "median_ms", "p25_ms", "p75_ms", "mean_ms",
  //  "min_ms", "max_ms", "rse", "samples", "stop_reason", "warmup_rounds",
  //  "wall" (the round-trip-free wall clock, when it is not the timer),
  //  "input_sets", "timing_seed", "cache_flush_bytes", "elapsed_ms",
  //  "shapes", "clocks", "device"}.
  std::optional<json> timing;
  std::string device;              // e.g. "NVIDIA H200" or the CPU model
  json phase_ms = json::object();  // "check", "time", "total"

  bool ok() const { return status == ReferenceStatus::kOk; }
  bool invalid() const { return status == ReferenceStatus::kInvalid; }
};

json to_json(const ReferenceReport& r);
ReferenceReport reference_report_from_json(const json& j);

}  // namespace kforge::env
