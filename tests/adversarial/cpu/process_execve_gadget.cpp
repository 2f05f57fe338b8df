// Exploit: a process escape that replaces the runner itself: execve(2) of a
// shell, entered through libc's own syscall instruction (libc_gadget.h).
// Must be caught by: the running seccomp filter, violation `sandbox`
// ("blocked syscall execve").
// Task: chain.
#include <kforge/kernel_abi.h>

#include "libc_gadget.h"

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  const long kExecve = 59;
  static const char* const argv[] = {"/bin/sh", "-c", "true", 0};
  return kf_gadget_syscall(kExecve, (long)"/bin/sh", (long)argv, 0, 0) < 0 ? 1 : 0;
}
