// One small task per op of the vocabulary (plus a few multi-op graphs), each
// with an independent expectation of its outputs. Shared by the reference
// execution tests and the KernelBench renderer's faithfulness test.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "kforge/core/task_spec.h"

namespace kforge::testing {

using Tensors = std::vector<at::Tensor>;

struct OpCase {
  std::string label;  // unique; also a valid file name
  TaskSpec task;
  // The outputs computed without the interpreter (hand-written formulas, or
  // the ATen function called directly with torch's argument conventions),
  // from the kernel inputs in task order.
  std::function<Tensors(const Tensors&)> expected;
  double tolerance = 1e-5;  // absolute and relative, in float32
};

// A tensor spec; `init` is an InitSpec kind with its default parameters.
TensorSpec tensor(const std::string& name, std::vector<int64_t> shape, DType dtype = DType::kFloat32,
                  const std::string& init = "normal");

// A task with one node `op` reading every input then every param, in order.
TaskSpec single_op_task(const std::string& op, std::vector<TensorSpec> inputs, json attrs = json::object(),
                        std::vector<TensorSpec> params = {});

// Every case; each op of the vocabulary appears in at least one.
const std::vector<OpCase>& op_cases();

}  // namespace kforge::testing
