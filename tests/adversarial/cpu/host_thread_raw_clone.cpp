// Exploit: host threads that outlive the call, without importing pthreads:
// clone(2) entered through a syscall instruction inside libc (libc_gadget.h),
// so no forbidden symbol and no syscall bytes reach the static check.
// Must be caught by: the runner's seccomp filter, violation `sandbox`
// ("blocked syscall clone in kf_forward").
// Task: chain.
#include <kforge/kernel_abi.h>

#include "libc_gadget.h"

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  const long kClone = 56, kSigchld = 17;
  // fork-like clone: the child would run the rest of this function.
  long pid = kf_gadget_syscall(kClone, kSigchld, 0, 0, 0);
  return pid < 0 ? 1 : 0;
}
