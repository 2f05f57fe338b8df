// Exploit: a process escape that passes the static check: fork(2) entered
// through libc's own syscall instruction (libc_gadget.h).
// Must be caught by: the running seccomp filter, violation `sandbox`
// ("blocked syscall fork").
// Task: chain.
#include <kforge/kernel_abi.h>

#include "libc_gadget.h"

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  const long kFork = 57;
  return kf_gadget_syscall(kFork, 0, 0, 0, 0) < 0 ? 1 : 0;
}
