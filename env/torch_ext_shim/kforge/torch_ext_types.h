// torch_ext shim (torch_ext_tensor.h): c10's value types. TORCH_CHECK's
// error, dtypes, devices, size lists and tensor options, with no CUDA work.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace c10 {

// What torch's TORCH_CHECK throws; kf_forward turns it into a failed call
// whose message reaches the policy.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void append(std::string* s, const char* v) { *s += v; }
inline void append(std::string* s, const std::string& v) { *s += v; }
inline void append(std::string* s, char v) { *s += v; }
inline void append(std::string* s, bool v) { *s += v ? "true" : "false"; }
template <typename T>
inline typename std::enable_if<std::is_arithmetic<T>::value>::type append(std::string* s, T v) {
  *s += std::to_string(v);
}
template <typename T>
inline typename std::enable_if<std::is_enum<T>::value>::type append(std::string* s, T v) {
  *s += std::to_string(static_cast<long long>(v));
}
inline std::string concat() { return ""; }
template <typename... Args>
inline std::string concat(const Args&... args) {
  std::string s;
  (void)std::initializer_list<int>{(append(&s, args), 0)...};
  return s;
}
}  // namespace detail

enum class ScalarType : int8_t { Byte, Char, Int, Long, Half, Float, Double, Bool, BFloat16 };
enum class DeviceType : int8_t { CPU, CUDA };
enum class Layout : int8_t { Strided };
enum class MemoryFormat : int8_t { Contiguous, Preserve };

using Half = __half;
using BFloat16 = __nv_bfloat16;

inline const char* toString(ScalarType t) {
  switch (t) {
    case ScalarType::Byte:
      return "Byte";
    case ScalarType::Char:
      return "Char";
    case ScalarType::Int:
      return "Int";
    case ScalarType::Long:
      return "Long";
    case ScalarType::Half:
      return "Half";
    case ScalarType::Float:
      return "Float";
    case ScalarType::Double:
      return "Double";
    case ScalarType::Bool:
      return "Bool";
    case ScalarType::BFloat16:
      return "BFloat16";
  }
  return "Unknown";
}

inline size_t elementSize(ScalarType t) {
  switch (t) {
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Bool:
      return 1;
    case ScalarType::Half:
    case ScalarType::BFloat16:
      return 2;
    case ScalarType::Int:
    case ScalarType::Float:
      return 4;
    case ScalarType::Long:
    case ScalarType::Double:
      return 8;
  }
  return 1;
}

template <typename T>
struct CppTypeToScalarType;
#define KFORGE_TORCH_EXT_TYPE(cpp, name)                  \
  template <>                                             \
  struct CppTypeToScalarType<cpp> {                       \
    static constexpr ScalarType value = ScalarType::name; \
  };
KFORGE_TORCH_EXT_TYPE(uint8_t, Byte)
KFORGE_TORCH_EXT_TYPE(int8_t, Char)
KFORGE_TORCH_EXT_TYPE(int32_t, Int)
KFORGE_TORCH_EXT_TYPE(int64_t, Long)
KFORGE_TORCH_EXT_TYPE(__half, Half)
KFORGE_TORCH_EXT_TYPE(float, Float)
KFORGE_TORCH_EXT_TYPE(double, Double)
KFORGE_TORCH_EXT_TYPE(bool, Bool)
KFORGE_TORCH_EXT_TYPE(__nv_bfloat16, BFloat16)
#undef KFORGE_TORCH_EXT_TYPE
// `long` and `long long` are both 64-bit here but distinct C++ types.
template <>
struct CppTypeToScalarType<long long> {
  static constexpr ScalarType value = ScalarType::Long;
};

class Device {
 public:
  Device(DeviceType type = DeviceType::CUDA, int index = 0) : type_(type), index_(index) {}  // NOLINT
  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  bool operator==(const Device& o) const { return type_ == o.type_ && index_ == o.index_; }
  bool operator!=(const Device& o) const { return !(*this == o); }

 private:
  DeviceType type_;
  int index_;
};

// Non-owning view of sizes, as torch's IntArrayRef.
class IntArrayRef {
 public:
  IntArrayRef() = default;
  IntArrayRef(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  // As torch's ArrayRef: valid for the full expression that holds the list
  // (torch::empty({n, m}, ...)), which is how it is used.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
  IntArrayRef(std::initializer_list<int64_t> l) : data_(l.begin()), size_(l.size()) {}  // NOLINT
#pragma GCC diagnostic pop
  IntArrayRef(const int64_t* data, size_t size) : data_(data), size_(size) {}
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  const int64_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t operator[](size_t i) const { return data_[i]; }
  int64_t front() const { return data_[0]; }
  int64_t back() const { return data_[size_ - 1]; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }

 private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(ScalarType t) : dtype_(t) {}   // NOLINT
  TensorOptions(DeviceType d) : device_(d) {}  // NOLINT
  TensorOptions(Device d) : device_(d) {}      // NOLINT
  TensorOptions dtype(ScalarType t) const {
    TensorOptions o = *this;
    o.dtype_ = t;
    return o;
  }
  TensorOptions device(Device d) const {
    TensorOptions o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions device(DeviceType d, int index = 0) const { return device(Device(d, index)); }
  TensorOptions layout(Layout) const { return *this; }
  TensorOptions requires_grad(bool = true) const { return *this; }
  TensorOptions memory_format(MemoryFormat) const { return *this; }
  ScalarType dtype() const { return dtype_; }
  Device device() const { return device_; }

 private:
  ScalarType dtype_ = ScalarType::Float;
  Device device_;
};

}  // namespace c10
