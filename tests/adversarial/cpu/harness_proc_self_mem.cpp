// Exploit: editing the harness through /proc/self/mem (patching the runner's
// reply code, or its copy of the timing variables).
// Must be caught by: load-time inspection, violation `forbidden_symbol`
// (fopen, "file access"); the running seccomp filter refuses every open too.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <stdio.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  FILE* mem = fopen("/proc/self/mem", "r+");
  if (mem == 0) return 1;
  fclose(mem);
  return 0;
}
