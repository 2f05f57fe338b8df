/* kforge/kernel_abi.h — the only header a candidate needs besides CUDA's own.
 *
 * A candidate exports kf_forward. Inputs are the task's inputs followed by its
 * params, in task order; outputs are preallocated by the harness in the order
 * of the task's "outputs". Every tensor is dense and row-major (strides are in
 * elements and are given for completeness). On the CUDA backend `data` is a
 * device pointer and all GPU work must be enqueued on `stream` (a
 * cudaStream_t); on the CPU backend `data` is a host pointer and `stream` is
 * NULL. Return 0 on success; any other value is reported as a failure.
 *
 * This header is plain C so that it compiles under nvcc, NVRTC-free host code,
 * g++ and clang alike. It must not grow dependencies.
 */
#ifndef KFORGE_KERNEL_ABI_H_
#define KFORGE_KERNEL_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KF_MAX_DIMS 8

/* dtype codes carried in kf_tensor.dtype. The numbering is part of the ABI. */
enum kf_dtype {
  KF_FLOAT32 = 0,
  KF_FLOAT16 = 1,
  KF_BFLOAT16 = 2,
  KF_FLOAT64 = 3,
  KF_INT32 = 4,
  KF_INT64 = 5,
  KF_INT8 = 6,
  KF_UINT8 = 7,
  KF_BOOL = 8
};

typedef struct {
  void* data;
  int32_t dtype;
  int32_t ndim;
  int64_t shape[KF_MAX_DIMS];
  int64_t stride[KF_MAX_DIMS];
} kf_tensor;

int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs, void* stream);

/* Number of elements of a tensor; a convenience for candidates. */
static inline int64_t kf_numel(const kf_tensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

#ifdef __cplusplus
}
#endif

#endif /* KFORGE_KERNEL_ABI_H_ */
