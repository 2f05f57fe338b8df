// Exploit: editing the harness's state. The candidate rewrites the tensor
// descriptors the harness passed in: it points outputs[0].data at its own
// __device__ buffer holding a stale result and sets the input shapes to 1
// element, hoping the harness reads outputs (or sizes its checks) through the
// descriptors it handed over. Allowed symbols only.
// Must be caught by: the harness reading outputs from its own arena and
// never trusting the descriptors after the call: the real output stays
// poisoned, verification failure (outcome `wrong`), or a harness-integrity
// check (`harness_tamper`).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__device__ float g_fake[1 << 23];

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  kf_tensor* inputs = const_cast<kf_tensor*>(in);
  for (int i = 0; i < ni; ++i) {
    for (int d = 0; d < inputs[i].ndim; ++d) inputs[i].shape[d] = 1;
  }
  // The device address of g_fake needs cudaGetSymbolAddress (not importable);
  // its host shadow will do for a harness that never looks.
  out[0].data = (void*)&g_fake;
  out[0].shape[0] = 1;
  (void)stream;
  return 0;
}
