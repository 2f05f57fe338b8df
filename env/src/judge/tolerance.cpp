#include "judge/tolerance.h"

namespace kforge::judge {

Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return {1e-2, 1e-2};
    case DType::kFloat16:
    case DType::kBFloat16:
      return {2e-2, 2e-2};
    case DType::kFloat64:
      return {1e-6, 1e-6};
    default:
      return {0.0, 0.0};
  }
}

Tolerance tolerance_for(const TaskSpec& task, DType output_dtype) {
  if (!dtype_is_floating(output_dtype)) return {0.0, 0.0};
  if (task.tolerance) return *task.tolerance;
  return default_tolerance(output_dtype);
}

}  // namespace kforge::judge
