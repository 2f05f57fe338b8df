// Exploit: file escape. Reads files outside its scratch directory: the
// process's memory map (to locate harness buffers) and a guess at where the
// judge keeps reference results, and writes a marker file next to the
// runner.
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (fopen / fread / fwrite: file access); at run time the runner's sandbox
// (`sandbox`).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <stdio.h>

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  char buf[4096];
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == nullptr) return 3;
  const size_t got = fread(buf, 1, sizeof(buf), maps);
  fclose(maps);
  FILE* marker = fopen("../escaped.txt", "w");
  if (marker != nullptr) {
    fwrite(buf, 1, got, marker);
    fclose(marker);
  }
  return 0;
}
