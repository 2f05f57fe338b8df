// A named tensor of a task: an input the caller provides or a parameter
// (weight) of the model. Both are inputs of the candidate's kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/dtype.h"
#include "kforge/core/input_limits.h"

namespace kforge {

// How a tensor is filled for each seed. Values are chosen so that reference
// and candidate see the same data for the same seed.
struct InitSpec {
  // normal (mean, std), uniform [low, high), zeros, ones, kaiming_uniform and
  // xavier_uniform (fan from the shape, as torch.nn.init does), positive
  // (|normal| + low, for log/sqrt domains), randint [low, high), bernoulli (p
  // in `mean`, for bool/masks), arange (0, 1, ... row-major).
  std::string kind = "normal";
  double mean = 0.0;
  double std = 1.0;
  double low = -1.0;
  double high = 1.0;

  static const std::vector<std::string>& kinds();
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  InitSpec init;

  int64_t numel() const;
  size_t nbytes() const;
};

// The bound b of the U(-b, b) that kaiming_uniform and xavier_uniform draw
// from, with fans computed from the shape as torch.nn.init does (fan_in =
// shape[1] * receptive field; 1-d tensors use fan_in = fan_out = shape[0]).
// kaiming_uniform uses a = sqrt(5), the nn.Linear/nn.Conv default, which gives
// b = 1 / sqrt(fan_in). Defined with the op vocabulary (core/src/ops/).
double init_uniform_bound(const TensorSpec& spec);

json to_json(const InitSpec& init);
json to_json(const TensorSpec& spec);
InitSpec parse_init_spec(const Field& field);
TensorSpec parse_tensor_spec(const Field& field);

std::string shape_to_string(const std::vector<int64_t>& shape);  // "[4096, 1024]"

// Product of the dimensions; INT64_MAX when it does not fit in 64 bits, -1
// for a negative dimension. Never wraps, so a shape that cannot exist is never
// mistaken for a small one.
int64_t saturating_numel(const std::vector<int64_t>& shape);

// "" when `shape` is within the limits every tensor of a task must meet
// (rank, no negative dimension, element count; kforge/core/input_limits.h),
// else what is wrong, naming the limit. The caller says which tensor.
std::string check_shape_limits(const std::vector<int64_t>& shape);

}  // namespace kforge
