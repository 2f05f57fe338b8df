// Exploit: calling PyTorch from the candidate. dlopen()s libtorch_cuda and
// looks up an ATen entry point at run time, so the "kernel" is PyTorch's own
// (and no libtorch symbol appears among the object's imports).
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (dlopen / dlsym: dynamic loading); at run time the runner's sandbox refuses
// to open libraries once the candidate runs (`sandbox`), and CUPTI
// attribution would flag kernels that are not the candidate's.
// Task: examples/matmul_bias_relu.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <kforge/kernel_abi.h>

typedef int (*AddmmFn)(void* out, const void* bias, const void* a, const void* b);

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  static void* lib = nullptr;
  if (lib == nullptr) lib = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) return 3;
  AddmmFn addmm = (AddmmFn)dlsym(lib, "_ZN2at4_ops11addmm_relu_4callERKNS_6TensorES4_S4_");
  if (addmm == nullptr) return 4;
  return addmm(out[0].data, in[2].data, in[0].data, in[1].data);
}
