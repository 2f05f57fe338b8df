// Exploit: process escape. Runs a shell command from kf_forward (system(3)),
// and forks a child that would outlive the call.
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (system / fork: processes); at run time the runner's seccomp filter
// (`sandbox`).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <stdlib.h>
#include <unistd.h>

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  if (system("nvidia-smi -q > /tmp/kforge-escape.txt") != 0) return 3;
  const pid_t child = fork();
  if (child == 0) {
    sleep(60);
    _exit(0);
  }
  return 0;
}
