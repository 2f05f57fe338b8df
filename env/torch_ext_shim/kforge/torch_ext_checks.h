// torch_ext shim (torch_ext_tensor.h): torch's checking and dtype-dispatch
// macros, which throw c10::Error and bind scalar_t over c10::ScalarType.
#pragma once

#include <cuda_runtime.h>

#include "kforge/torch_ext_runtime.h"
#include "kforge/torch_ext_types.h"

#define TORCH_CHECK(cond, ...)                                                                     \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      throw ::c10::Error(::c10::detail::concat("Expected " #cond " to be true. ", ##__VA_ARGS__)); \
    }                                                                                              \
  } while (0)
#define TORCH_INTERNAL_ASSERT(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define AT_ASSERTM(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define AT_ASSERT(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define TORCH_CHECK_EQ(a, b) TORCH_CHECK((a) == (b))
#define C10_CUDA_CHECK(expr) ::kforge::torch_ext::check_cuda((expr), #expr)
#define AT_CUDA_CHECK(expr) C10_CUDA_CHECK(expr)
#define C10_CUDA_KERNEL_LAUNCH_CHECK() C10_CUDA_CHECK(cudaGetLastError())

// AT_DISPATCH_*: call the lambda with scalar_t bound to the tensor's type.
#define KFORGE_DISPATCH_CASE(enum_name, cpp_type, ...) \
  case ::c10::ScalarType::enum_name: {                 \
    using scalar_t = cpp_type;                         \
    return __VA_ARGS__();                              \
  }
#define KFORGE_DISPATCH_DEFAULT(TYPE, NAME) \
  default:                                  \
    throw ::c10::Error(::c10::detail::concat("\"", NAME, "\" not implemented for '", ::c10::toString(TYPE), "'"));
#define AT_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...)     \
  [&] {                                                 \
    switch (TYPE) {                                     \
      KFORGE_DISPATCH_CASE(Float, float, __VA_ARGS__)   \
      KFORGE_DISPATCH_CASE(Double, double, __VA_ARGS__) \
      KFORGE_DISPATCH_DEFAULT(TYPE, NAME)               \
    }                                                   \
  }()
#define AT_DISPATCH_FLOATING_TYPES_AND_HALF(TYPE, NAME, ...) \
  [&] {                                                      \
    switch (TYPE) {                                          \
      KFORGE_DISPATCH_CASE(Float, float, __VA_ARGS__)        \
      KFORGE_DISPATCH_CASE(Double, double, __VA_ARGS__)      \
      KFORGE_DISPATCH_CASE(Half, ::c10::Half, __VA_ARGS__)   \
      KFORGE_DISPATCH_DEFAULT(TYPE, NAME)                    \
    }                                                        \
  }()
#define AT_DISPATCH_FLOATING_TYPES_AND2(T1, T2, TYPE, NAME, ...)   \
  [&] {                                                            \
    switch (TYPE) {                                                \
      KFORGE_DISPATCH_CASE(Float, float, __VA_ARGS__)              \
      KFORGE_DISPATCH_CASE(Double, double, __VA_ARGS__)            \
      KFORGE_DISPATCH_CASE(Half, ::c10::Half, __VA_ARGS__)         \
      KFORGE_DISPATCH_CASE(BFloat16, ::c10::BFloat16, __VA_ARGS__) \
      KFORGE_DISPATCH_DEFAULT(TYPE, NAME)                          \
    }                                                              \
  }()
#define AT_DISPATCH_ALL_TYPES(TYPE, NAME, ...)          \
  [&] {                                                 \
    switch (TYPE) {                                     \
      KFORGE_DISPATCH_CASE(Float, float, __VA_ARGS__)   \
      KFORGE_DISPATCH_CASE(Double, double, __VA_ARGS__) \
      KFORGE_DISPATCH_CASE(Int, int32_t, __VA_ARGS__)   \
      KFORGE_DISPATCH_CASE(Long, int64_t, __VA_ARGS__)  \
      KFORGE_DISPATCH_CASE(Char, int8_t, __VA_ARGS__)   \
      KFORGE_DISPATCH_CASE(Byte, uint8_t, __VA_ARGS__)  \
      KFORGE_DISPATCH_DEFAULT(TYPE, NAME)               \
    }                                                   \
  }()
