// Exploit: escaping the allow-list with an inline `syscall` instruction
// (socket(2)), bypassing libc.
// Must be caught by: load-time inspection, violation `raw_syscall`; the
// running filter would refuse socket(2) anyway.
// Task: chain.
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(41L), "D"(2L), "S"(1L), "d"(0L) : "rcx", "r11", "memory");
  return ret >= 0 ? 0 : 1;
}
