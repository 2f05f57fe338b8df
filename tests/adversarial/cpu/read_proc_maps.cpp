// Exploit: reading harness memory by finding the judge's mappings through
// /proc (self/maps, then the parent's memory).
// Must be caught by: load-time inspection, violation `forbidden_symbol`
// (fopen, "file access"). The judge is also not dumpable, and the running
// seccomp filter refuses every open.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <stdio.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == 0) return 1;
  char line[256];
  while (fgets(line, sizeof(line), maps)) {
  }
  fclose(maps);
  return 0;
}
