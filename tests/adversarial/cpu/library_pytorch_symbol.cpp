// Exploit: calling PyTorch directly: the candidate declares an ATen function
// itself (no headers needed) and leaves the symbol for the loader to resolve
// from a libtorch that is already loaded in the process.
// Must be caught by: load-time inspection, violation `forbidden_symbol`
// ("PyTorch"); the runner does not load libtorch either.
// Task: chain.
#include <kforge/kernel_abi.h>

namespace at {
void manual_seed(uint64_t seed);
}

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  at::manual_seed(0);
  return 0;
}
