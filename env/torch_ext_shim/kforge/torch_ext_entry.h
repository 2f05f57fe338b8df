// How kf_forward calls a torch_ext entry function (docs/torch-ext.md): the
// harness's buffers become tensors, the entry runs with its kernels on the
// harness's stream, and what it returns is checked against the task's outputs
// and copied into them. The compiler appends one line to the candidate:
//   KFORGE_TORCH_EXT_ENTRY(name)
#pragma once

#include <stdio.h>

#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kforge/torch_ext_tensor.h"

namespace kforge::torch_ext {

// Every parameter of the entry is one of the task's tensors (inputs, then
// params, in task order): anything else has no value to pass.
template <typename P>
struct is_tensor_param
    : std::is_same<typename std::remove_cv<typename std::remove_reference<P>::type>::type, at::Tensor> {};

inline void collect(const at::Tensor& t, std::vector<at::Tensor>* out) { out->push_back(t); }
inline void collect(const std::vector<at::Tensor>& v, std::vector<at::Tensor>* out) {
  out->insert(out->end(), v.begin(), v.end());
}
template <typename... T>
void collect(const std::tuple<T...>& t, std::vector<at::Tensor>* out) {
  std::apply([out](const auto&... x) { (collect(x, out), ...); }, t);
}

inline std::string shape_text(const int64_t* s, int n) {
  std::string text = "[";
  for (int i = 0; i < n; ++i) text += (i ? ", " : "") + std::to_string(s[i]);
  return text + "]";
}

// The returned tensors into the harness's outputs: same count, dtype and
// shape, or the call fails with a message that says which differs.
inline void store_results(const std::vector<at::Tensor>& results, kf_tensor* outputs, int num_outputs) {
  if (static_cast<int>(results.size()) != num_outputs) {
    throw c10::Error(c10::detail::concat("torch_ext: the entry returned ", results.size(), " tensor(s); the task has ",
                                         num_outputs, " output(s)"));
  }
  for (int i = 0; i < num_outputs; ++i) {
    const at::Tensor out = at::Tensor::from_kf(outputs[i]);
    const at::Tensor& r = results[static_cast<size_t>(i)];
    if (r.scalar_type() != out.scalar_type()) {
      throw c10::Error(c10::detail::concat("torch_ext: output ", i, " is ", c10::toString(r.scalar_type()),
                                           "; the task expects ", c10::toString(out.scalar_type())));
    }
    if (r.sizes().vec() != out.sizes().vec()) {
      throw c10::Error(c10::detail::concat("torch_ext: output ", i, " has shape ",
                                           shape_text(r.sizes().data(), static_cast<int>(r.dim())),
                                           "; the task expects ", shape_text(outputs[i].shape, outputs[i].ndim)));
    }
    if (r.data_ptr() != outputs[i].data) at::Tensor(out).copy_(r);
  }
}

template <typename R, typename... P, size_t... I>
int call_entry(R (*entry)(P...), const kf_tensor* inputs, kf_tensor* outputs, int num_outputs,
               std::index_sequence<I...>) {
  std::vector<at::Tensor> results;
  collect(entry(at::Tensor::from_kf(inputs[I])...), &results);
  store_results(results, outputs, num_outputs);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

template <typename R, typename... P>
int run_entry(R (*entry)(P...), const char* name, const kf_tensor* inputs, int num_inputs, kf_tensor* outputs,
              int num_outputs, void* stream) {
  static_assert((is_tensor_param<P>::value && ...),
                "torch_ext: every parameter of the entry function must be a torch::Tensor (the task's inputs, then "
                "its params, in order); pass constants as literals inside the function");
  current_stream() = static_cast<cudaStream_t>(stream);
  try {
    if (num_inputs != static_cast<int>(sizeof...(P))) {
      throw c10::Error(c10::detail::concat("torch_ext: ", name, " takes ", sizeof...(P), " tensor(s); the task passes ",
                                           num_inputs, " (its inputs, then its params)"));
    }
    return call_entry(entry, inputs, outputs, num_outputs, std::index_sequence_for<P...>{});
  } catch (const std::exception& e) {
    // The runner keeps the tail of what the candidate prints for the report.
    fprintf(stderr, "%s: %s\n", name, e.what());
    fflush(stderr);
    return 1;
  }
}

}  // namespace kforge::torch_ext

#define KFORGE_TORCH_EXT_ENTRY(name)                                                                       \
  extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,  \
                            void* stream) {                                                                \
    return ::kforge::torch_ext::run_entry(&name, #name, inputs, num_inputs, outputs, num_outputs, stream); \
  }
