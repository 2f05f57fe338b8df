// How close a candidate's output must be to the reference, per output dtype.
//
// Floating outputs use the task's tolerance when it has one, else:
//   float32  atol 1e-2, rtol 1e-2  (KernelBench's check)
//   float16, bfloat16  2e-2 / 2e-2 (about 8 ulp of half precision at 1.0)
//   float64  1e-6 / 1e-6
// Integer and bool outputs are always exact.
#pragma once

#include "kforge/core/dtype.h"
#include "kforge/core/task_spec.h"

namespace kforge::judge {

Tolerance default_tolerance(DType dtype);
Tolerance tolerance_for(const TaskSpec& task, DType output_dtype);

}  // namespace kforge::judge
