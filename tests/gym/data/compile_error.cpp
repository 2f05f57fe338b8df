// Does not compile: uses an undeclared variable.
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  float* y = static_cast<float*>(outputs[0].data);
  y[0] = undeclared_scale * 2.0f;
  return 0;
}
