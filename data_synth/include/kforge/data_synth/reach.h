// How many distinct tasks the vocabulary and rules can produce: a sampled
// estimate (`kforge synth --reach-sample M`, reach.json, the dataset card),
// against the target of 100,000.
//
// M graphs are drawn with seeds of their own (not the run's slots) and taken
// through the cheap stages that do not run anything: compose, shape search
// (window, memory cap, near_roofline) and contamination. Their canonical
// hashes (graph_hash.h: sizes are not hashed, so distinct means a different
// kernel to write) are counted; Chao1 (bias-corrected: D + f1 (f1 - 1) /
// (2 (f2 + 1)), with f1 the hashes seen once and f2 twice) estimates how many
// distinct ones the draw can reach. Chao1 is a lower bound in expectation
// where some graphs are far likelier than others, as here. The share of
// drawn graphs the in-process filters and the judge would then accept is
// taken from the run's own attempts (filter_pass_share), and the estimate of
// distinct valid tasks is their product.
#pragma once

#include <cstdint>
#include <string>

#include "kforge/core/document.h"
#include "kforge/data_synth/composer.h"
#include "kforge/data_synth/contamination.h"
#include "kforge/data_synth/shape_sampler.h"

namespace kforge::synth {

inline constexpr double kReachTarget = 100000;

struct ReachEstimate {
  int64_t samples = 0;
  int64_t passed = 0;    // through compose, shape search and contamination
  int64_t distinct = 0;  // distinct canonical hashes among those
  int64_t seen_once = 0, seen_twice = 0;
  double chao1 = 0;              // distinct graphs reachable through those stages
  double filter_pass_share = 0;  // of such graphs, the share the filters and judge accept
  double estimate = 0;           // chao1 x filter_pass_share
  double seconds = 0;
  json to_json() const;
};

// Draws `samples` graphs with `workers` threads (0: every core). The seeds are
// derived from `seed` apart from every slot's, so the figure is the seed's.
ReachEstimate estimate_reach(uint64_t seed, int64_t samples, const ComposeOptions& compose, const ShapeOptions& shapes,
                             const DeviceProfile& profile, const KernelBenchSignatures& signatures, int workers);

// The share of attempts that reached the filters and were accepted, from a
// run's rejection histogram and task count: tasks / (tasks + rejections by
// the filters, the judge, dedup's duplicates of accepted tasks).
double filter_pass_share(int64_t tasks, const json& rejections);

}  // namespace kforge::synth
