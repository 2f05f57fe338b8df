// Crashes: writes through a null pointer.
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  volatile float* p = nullptr;
  *p = static_cast<float>(num_inputs);
  return 0;
}
