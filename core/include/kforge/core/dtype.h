// Element types of task tensors, with the codes of the candidate ABI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kforge/kernel_abi.h"

namespace kforge {

enum class DType : int32_t {
  kFloat32 = KF_FLOAT32,
  kFloat16 = KF_FLOAT16,
  kBFloat16 = KF_BFLOAT16,
  kFloat64 = KF_FLOAT64,
  kInt32 = KF_INT32,
  kInt64 = KF_INT64,
  kInt8 = KF_INT8,
  kUInt8 = KF_UINT8,
  kBool = KF_BOOL,
};

// "float32", "float16", ... as written in task files.
const std::string& dtype_name(DType dtype);
// Throws InputError-free std::nullopt style: returns false if unknown.
bool parse_dtype(const std::string& name, DType* out);
const std::vector<std::string>& dtype_names();
size_t dtype_size(DType dtype);
bool dtype_is_floating(DType dtype);
// The C type name a candidate would use ("float", "__half", ...).
const char* dtype_c_type(DType dtype);

}  // namespace kforge
