// Exploit: calling libraries outside the allow-list: dlopen libtorch and run
// PyTorch's own kernels (or any other library's) instead of writing one.
// Must be caught by: load-time inspection, violation `forbidden_symbol`
// (dlopen/dlsym, "dynamic loading"); the running filter refuses the opens.
// Task: chain.
#include <dlfcn.h>
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  void* torch = dlopen("libtorch_cpu.so", RTLD_NOW);
  if (torch == 0) return 1;
  void* add = dlsym(torch, "_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE");
  return add ? 0 : 1;
}
