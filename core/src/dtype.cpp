#include "kforge/core/dtype.h"

#include <array>

namespace kforge {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string name;
  size_t size;
  bool floating;
  const char* c_type;
};

const std::array<DTypeInfo, 9>& table() {
  static const std::array<DTypeInfo, 9> kTable = {{
      {DType::kFloat32, "float32", 4, true, "float"},
      {DType::kFloat16, "float16", 2, true, "__half"},
      {DType::kBFloat16, "bfloat16", 2, true, "__nv_bfloat16"},
      {DType::kFloat64, "float64", 8, true, "double"},
      {DType::kInt32, "int32", 4, false, "int32_t"},
      {DType::kInt64, "int64", 8, false, "int64_t"},
      {DType::kInt8, "int8", 1, false, "int8_t"},
      {DType::kUInt8, "uint8", 1, false, "uint8_t"},
      {DType::kBool, "bool", 1, false, "bool"},
  }};
  return kTable;
}

const DTypeInfo& info(DType dtype) {
  for (const auto& i : table()) {
    if (i.dtype == dtype) return i;
  }
  return table()[0];
}

}  // namespace

const std::string& dtype_name(DType dtype) { return info(dtype).name; }

bool parse_dtype(const std::string& name, DType* out) {
  for (const auto& i : table()) {
    if (i.name == name) {
      *out = i.dtype;
      return true;
    }
  }
  return false;
}

const std::vector<std::string>& dtype_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (const auto& i : table()) v.push_back(i.name);
    return v;
  }();
  return kNames;
}

size_t dtype_size(DType dtype) { return info(dtype).size; }
bool dtype_is_floating(DType dtype) { return info(dtype).floating; }
const char* dtype_c_type(DType dtype) { return info(dtype).c_type; }

}  // namespace kforge
