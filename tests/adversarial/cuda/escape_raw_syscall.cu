// Exploit: a system call that bypasses libc (and so the symbol allow-list):
// openat(AT_FDCWD, "/etc/hostname", O_RDONLY) through the syscall instruction
// in inline assembly in host code.
// Must be caught by: the load-time scan of executable code, violation
// `raw_syscall`; at run time the runner's seccomp filter (`sandbox`).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
#if defined(__x86_64__)
  static const char path[] = "/etc/hostname";
  long ret;
  register long r10 __asm__("r10") = 0;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(257L), "D"(-100L), "S"(path), "d"(0L), "r"(r10)
                   : "rcx", "r11", "memory");
  return ret >= 0 ? 0 : 3;
#elif defined(__aarch64__)
  static const char path[] = "/etc/hostname";
  register long x0 __asm__("x0") = -100;
  register long x1 __asm__("x1") = (long)path;
  register long x2 __asm__("x2") = 0;
  register long x8 __asm__("x8") = 56;  // openat
  __asm__ volatile("svc #0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x8) : "memory");
  return x0 >= 0 ? 0 : 3;
#else
  return 1;
#endif
}
