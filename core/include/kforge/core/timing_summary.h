// The timing part of the judge's report (docs/architecture.md#timing) as a typed, versioned
// value: what observations, measurements, the CLI, trajectories and replay
// read, instead of looking keys up in free-form JSON.
//
// Its JSON form (to_json / timing_summary_from_json) is the wire and file
// format: the judge sends it to the environment, the environment puts it in
// every step's info["eval_report"]["timing"], and trajectories carry it. The
// layout is documented field by field in docs/schemas.md; a change that
// removes or retypes a field bumps kTimingSummarySchemaVersion.
//
// Typed fields hold what any consumer may rely on. A few records whose shape
// depends on the backend and on what the device offers (clock readings, the
// roofline check, CUDA drain times, graph and launch-gate state, the energy
// window, the runner's sandbox state) stay JSON objects: diagnostics for
// people, documented but not versioned key by key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kforge/core/document.h"

namespace kforge {

inline constexpr int kTimingSummarySchemaVersion = 1;

// Summary statistics of one side's samples, in milliseconds.
struct SampleStats {
  double median_ms = 0.0;
  double p25_ms = 0.0;
  double p75_ms = 0.0;
  double mean_ms = 0.0;
  double min_ms = 0.0;
  double max_ms = 0.0;
  // Relative standard error of the median; absent when it is undefined (fewer
  // than two samples, or a zero median).
  std::optional<double> rse;
  int64_t samples = 0;
  // Joules per call (CUDA, EvalOptions::energy_window_ms), when measured.
  std::optional<double> energy_j;
};

// The speedup's confidence interval, from the paired rounds of the primary
// clock (env/src/judge/sample_stats.h: the sign-test interval of the
// per-round log ratios reference / candidate).
struct SpeedupInterval {
  double lo = 0.0;  // 0 < lo <= hi
  double hi = 0.0;
  // The interval's exact coverage (>= level from 6 rounds on; fewer rounds
  // give [min, max] with its own, lower, coverage).
  double confidence = 0.0;
  double level = 0.95;  // the nominal level asked for
  int64_t rounds = 0;
  std::string method;  // "paired_log_ratio_sign_test"
  // What the interval is an interval for: the median per-round ratio
  // reference / candidate (exp of the median paired log ratio), always within
  // [lo, hi]. The headline `speedup` is the ratio of the two medians, the same
  // quantity when both sides' noise has one shape, but a different estimate of
  // it: with an interval this narrow (0.2 % wide on a GPU) it can fall just
  // outside. Absent in files written before it was reported.
  std::optional<double> median;
};

struct TimingSummary {
  int schema_version = kTimingSummarySchemaVersion;
  // The clock both sides were timed with: "cpu_time" (CPU backend),
  // "device_events" (CUDA) or "wall_round_trip" (either, as a fallback).
  std::string timer;
  std::string device;
  SampleStats reference;  // eager PyTorch, timed interleaved with the candidate
  SampleStats candidate;
  // reference.median_ms / candidate.median_ms; absent when the candidate's
  // median is not positive (faster than the harness resolves) or no samples
  // were taken.
  std::optional<double> speedup;
  // The speedup's confidence interval; absent where `speedup` is, or when a
  // bound fell on a round the candidate ran faster than the harness resolves.
  std::optional<SpeedupInterval> speedup_interval;
  // Null calls to the runner on the primary clock: the harness overhead
  // subtracted from every candidate sample.
  SampleStats overhead;
  // The runner's own clock around kf_forward: a cross-check, never the time.
  std::optional<SampleStats> candidate_self_reported;
  // Interquartile range of the overhead: differences below it are noise.
  std::optional<double> resolution_ms;
  std::string stop_reason;  // the stopping rule's verdict (sample_stats.h), or "eval_timeout"
  int warmup_rounds = 0;
  // How long the warm-up lasted: EvalOptions::warmup_ms, or less where the
  // device's clocks were at speed after warmup_min_ms.
  std::optional<double> warmup_ms;
  int input_sets = 0;
  bool fresh_inputs = true;
  uint64_t timing_seed = 0;
  uint64_t cache_flush_bytes = 0;
  double elapsed_ms = 0.0;
  // The judge's round-trip clock, reported beside another primary clock
  // (cpu_time, device_events).
  std::optional<SampleStats> reference_wall;
  std::optional<SampleStats> candidate_wall;
  std::optional<SampleStats> overhead_wall;
  std::optional<double> speedup_wall;
  // Why the device clock was replaced by the round trip; empty when it was not.
  std::string device_clock_rejected;
  // Where the runner's own clock around kf_forward disagreed with the CPU
  // time the kernel accounted to it; empty when it agreed. A cross-check
  // only: no side is timed by the runner's clock.
  std::string self_clock_disagrees;
  // Diagnostics (JSON objects, null when absent): see docs/schemas.md.
  json clocks = nullptr;
  json roofline = nullptr;
  json drain = nullptr;
  json cuda_graph = nullptr;
  json launch_gate = nullptr;
  json energy = nullptr;
  json sandbox = nullptr;

  // Samples were taken on both sides.
  bool timed() const { return candidate.samples > 0 && reference.samples > 0; }
};

json to_json(const SampleStats& s);
json to_json(const TimingSummary& t);
json to_json(const SpeedupInterval& i);

// Read with ObjectReader: InputError naming the field (e.g. "field
// /candidate/median_ms: expected a number") for a wrong type, a missing
// required field, an unknown key or another schema version.
SampleStats sample_stats_from_field(const Field& field);
SpeedupInterval speedup_interval_from_field(const Field& field);
TimingSummary timing_summary_from_field(const Field& field);
TimingSummary timing_summary_from_json(const json& j, const std::string& source = "<timing>");

}  // namespace kforge
