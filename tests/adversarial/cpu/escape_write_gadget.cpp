// Exploit: escaping the scratch directory by creating a file in its parent
// with openat(O_WRONLY|O_CREAT) entered through libc's own syscall
// instruction (libc_gadget.h): no forbidden symbol, no syscall bytes.
// Must be caught by: the running seccomp filter, violation `sandbox`
// ("blocked syscall openat").
// Task: chain.
#include <kforge/kernel_abi.h>

#include "libc_gadget.h"

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  const long kOpenat = 257, kAtFdcwd = -100, kWriteCreate = 01 | 0100;
  long fd = kf_gadget_syscall(kOpenat, kAtFdcwd, (long)"../kforge-escape.txt", kWriteCreate, 0644);
  return fd < 0 ? 1 : 0;
}
