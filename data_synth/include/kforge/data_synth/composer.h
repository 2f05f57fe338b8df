// The composer: draws an operator graph of 1-8 ops from the vocabulary
// (core/op_registry.h): a main-loop op (GEMM, batched GEMM, convolution,
// transposed convolution) followed by an epilogue, or an epilogue-only
// graph; with bias and second-input branches, residual connections to
// earlier values, sampled attributes and several dtypes where the ops allow.
//
// Every kernel input carries the batch dimension first and params never do,
// so a task is the same graph at any batch size: the shape sampler picks the
// batch (shape_sampler.h), the shape variants change it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kforge/core/task_spec.h"

namespace kforge::synth {

struct ComposeOptions {
  // Weights of graphs with 1 to 8 ops: mean ~4.2, KernelBench level 2's.
  std::vector<double> op_count_weights = {0.03, 0.12, 0.20, 0.22, 0.17, 0.12, 0.08, 0.06};
  // Probability that the graph starts with a main-loop op.
  double main_loop_share = 0.7;
  // Shares of float16 and bfloat16 graphs (the rest is float32).
  double float16_share = 0.12;
  double bfloat16_share = 0.10;
};

// What the composer decided, for the dataset card and the task's meta.
struct Composition {
  TaskSpec task;        // at the requested batch; no shape variants, no id yet
  std::string pattern;  // e.g. "conv2d>bias>relu>max_pool2d"
};

// Draws the graph for `seed` and builds it at batch size `batch`. The same
// seed gives the same graph (ops, attrs, dtypes, every non-batch size) at
// every batch. InputError when the draw does not type-check at that batch
// (a rejection of the attempt, counted by the caller).
Composition compose(uint64_t seed, int64_t batch, const ComposeOptions& options = {});

// Default tolerance of synthesized tasks of this dtype, recorded in each task.
Tolerance synth_tolerance(DType dtype);

}  // namespace kforge::synth
