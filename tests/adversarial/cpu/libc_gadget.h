// Shared by the sandbox candidates: enter the kernel through a `syscall`
// instruction inside libc's own code. The candidate then imports nothing
// forbidden and contains no system-call bytes, so the static ELF checks pass
// and only the runner's seccomp filter stands between it and the system call.
// That is the point: these candidates prove the sandbox holds on its own.
#ifndef KFORGE_TESTS_ADVERSARIAL_LIBC_GADGET_H_
#define KFORGE_TESTS_ADVERSARIAL_LIBC_GADGET_H_

#include <stdint.h>
#include <stdlib.h>

// Scans libc's text from abort() (an allowed import) for `mov $imm32, %eax;
// syscall; ret`, the whole body of a small syscall wrapper, and returns the
// address of its `syscall` instruction (so that, unsandboxed, the call returns
// normally). The pattern bytes are XOR-masked with volatile
// keys so that the compiler cannot fold them into a constant that would put
// the very bytes we look for into this object.
static const unsigned char* kf_syscall_gadget(void) {
  static volatile unsigned char key = 0x5a;
  const unsigned char k = key;
  const unsigned char mov_eax = 0xe2 ^ k, first = 0x55 ^ k, second = 0x5f ^ k;  // b8, 0f, 05
  const unsigned char* p = (const unsigned char*)(uintptr_t)&abort;
  for (long i = 0; i < (4L << 20); ++i) {
    if (p[i] == mov_eax && p[i + 3] == 0 && p[i + 4] == 0 && p[i + 5] == first && p[i + 6] == second &&
        p[i + 7] == 0xc3) {
      return p + i + 5;
    }
  }
  return 0;
}

// The system call `nr` with up to four arguments, through the gadget. The red
// zone is stepped over because `call` pushes onto the stack.
static long kf_gadget_syscall(long nr, long a1, long a2, long a3, long a4) {
  const unsigned char* gadget = kf_syscall_gadget();
  if (gadget == 0) return -1;
  long ret;
  register long r10 __asm__("r10") = a4;
  __asm__ volatile("sub $128, %%rsp\n\tcall *%[g]\n\tadd $128, %%rsp"
                   : "=a"(ret)
                   : [g] "r"(gadget), "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10)
                   : "rcx", "r11", "memory", "cc");
  return ret;
}

#endif  // KFORGE_TESTS_ADVERSARIAL_LIBC_GADGET_H_
