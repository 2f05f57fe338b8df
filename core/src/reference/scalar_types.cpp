#include <string>

#include "kforge/core/reference.h"

namespace kforge::ref {

at::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return at::kFloat;
    case DType::kFloat16:
      return at::kHalf;
    case DType::kBFloat16:
      return at::kBFloat16;
    case DType::kFloat64:
      return at::kDouble;
    case DType::kInt32:
      return at::kInt;
    case DType::kInt64:
      return at::kLong;
    case DType::kInt8:
      return at::kChar;
    case DType::kUInt8:
      return at::kByte;
    case DType::kBool:
      return at::kBool;
  }
  return at::kFloat;
}

DType from_scalar_type(at::ScalarType type) {
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt32, DType::kInt64,
                  DType::kInt8, DType::kUInt8, DType::kBool}) {
    if (to_scalar_type(d) == type) return d;
  }
  throw InputError(std::string("tensor dtype ") + c10::toString(type) +
                   " is not a task dtype (float32, float16, bfloat16, float64, int32, int64, int8, uint8, bool)");
}

}  // namespace kforge::ref
