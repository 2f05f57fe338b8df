// The ATen implementation of every op of the vocabulary, keyed by op name.
// Each takes the node's input tensors and its resolved attrs (defaults filled,
// already type-checked by the op registry) and returns the node's value.
// Internal to kforge_reference.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kforge/core/document.h"

namespace kforge::ref::internal {

using Tensors = std::vector<at::Tensor>;
using AtenOp = std::function<at::Tensor(const Tensors&, const json&)>;
using AtenOpTable = std::map<std::string, AtenOp>;

const AtenOpTable& aten_ops();

void add_main_loop_ops(AtenOpTable& t);
void add_pointwise_ops(AtenOpTable& t);  // activations, elementwise, softmax
void add_norm_ops(AtenOpTable& t);
void add_reduction_ops(AtenOpTable& t);
void add_pooling_ops(AtenOpTable& t);
void add_layout_ops(AtenOpTable& t);

// The optional input i (a bias, a norm weight), absent when not given.
c10::optional<at::Tensor> optional_input(const Tensors& in, size_t i);
// A number attr as the Scalar torch would see: ints stay integral.
at::Scalar to_scalar(const json& value);

}  // namespace kforge::ref::internal
