// Exploit: a network escape that passes the static check: socket(2) entered
// through libc's own syscall instruction (libc_gadget.h).
// Must be caught by: the running seccomp filter, violation `sandbox`
// ("blocked syscall socket").
// Task: chain.
#include <kforge/kernel_abi.h>

#include "libc_gadget.h"

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  const long kSocket = 41, kAfInet = 2, kSockStream = 1;
  long s = kf_gadget_syscall(kSocket, kAfInet, kSockStream, 0, 0);
  return s < 0 ? 1 : 0;
}
