// The composer's private parts (composer.h is the interface): the graph
// builder that type-checks each node as it is added, what is known about a
// value, and the drawing helpers shared by the main-loop ops
// (compose_main_loop.cpp) and the epilogue ops (compose_epilogue.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/op_registry.h"
#include "kforge/core/task_spec.h"
#include "kforge/data_synth/rng.h"

namespace kforge::synth::internal {

// What is known about the values of a tensor, so that domain-restricted ops
// (log, sqrt, reciprocal) are only drawn where they are defined and ops that
// would be no-ops there (relu of a non-negative tensor) are not drawn at all.
enum class Domain { kAny, kNonNegative, kPositive };

struct Value {
  std::string name;
  TensorType type;
  Domain domain = Domain::kAny;
  // A value that a share of the elements take exactly: the bound of a relu,
  // clamp or max/min with a scalar (0 after relu). eq/ne against it is a mask
  // that is neither all true nor all false (the elements that were clipped),
  // where eq/ne against a value of a continuous distribution would be constant.
  std::optional<double> atom;
  // The op that made it ("" for an input): log is not drawn after exp, nor
  // exp after log (the pair is the identity a kernel would skip).
  std::string op;
};

// Builds the task node by node, type-checking each node as it is added
// (infer_node), so an impossible draw fails where it is made.
class GraphBuilder {
 public:
  GraphBuilder(DType dtype, int64_t batch) : dtype_(dtype), batch_(batch) {}

  DType dtype() const { return dtype_; }
  int64_t batch() const { return batch_; }

  // A kernel input: `shape` excludes the batch dim, which is prepended.
  Value input(std::vector<int64_t> shape, InitSpec init = {});
  Value param(const std::string& stem, std::vector<int64_t> shape, InitSpec init);
  Value node(const std::string& op, const std::vector<Value>& in, json attrs, Domain domain,
             std::optional<double> atom = std::nullopt);

  // Earlier values (inputs excluded) with exactly this type: residual sources.
  std::vector<Value> earlier_with_type(const TensorType& t, const std::string& except) const;

  TaskSpec finish(const std::string& output);

 private:
  DType dtype_;
  int64_t batch_;
  int inputs_ = 0;
  int params_ = 0;
  TaskSpec task_;
  std::vector<Value> values_;
};

InitSpec normal(double mean = 0.0, double std = 1.0);
InitSpec uniform(double low, double high);
InitSpec kind(const std::string& k);

// A size drawn log-uniformly, then usually rounded the way real models size
// things (powers of two, multiples of 8), sometimes left odd: kernels must not
// assume divisibility.
int64_t draw_dim(Rng& rng, int64_t lo, int64_t hi);

struct Draw {
  Rng& rng;
  GraphBuilder& g;
  std::vector<std::string> pattern;
};

// The shape of a param broadcast over the channel dim of (N, C, *) (conv
// outputs) or over the last dim.
std::vector<int64_t> broadcast_param_shape(const Value& cur, bool conv_like);

// ------------------------------------------------- compose_main_loop.cpp

// A GEMM, batched GEMM, convolution or transposed convolution on new inputs.
Value main_loop(Draw& d);
// An epilogue-only graph starts from a plain input of rank 2-4.
Value plain_input(Draw& d);
// A second main-loop op on the current value (an MLP's next linear, or a
// convolution with the same spatial rank); nullopt when the shape does not fit.
std::optional<Value> chained_main_loop(Draw& d, const Value& cur, bool conv_like);

// -------------------------------------------------- compose_epilogue.cpp

// One epilogue op after `cur`; nullopt when the drawn kind does not fit the
// current shape (the caller draws again). `conv_like` tracks whether the value
// is still (N, C, *); a layout op clears it.
std::optional<Value> epilogue_op(Draw& d, const Value& cur, bool* conv_like, bool last);

}  // namespace kforge::synth::internal
