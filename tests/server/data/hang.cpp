// Never returns: the judge kills it at the call timeout. Makes a step that is
// slow for a known, bounded time, so that ordering tests need no sleeps.
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* inputs, int num_inputs, kf_tensor* outputs, int num_outputs,
                          void* stream) {
  volatile int spin = 1;
  while (spin) {
  }
  return 0;
}
