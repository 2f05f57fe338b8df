// Exploit: tampering with harness state: writing garbage into the runner's
// control socket (fd 3, reached by pointing stdout's FILE at it) to confuse
// or desynchronize the judge.
// Must be caught by: the judge's framing and protocol checks: violation
// `harness_tamper`.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <stdio.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  // Give stdout its buffer while it still points at fd 1: stdio asks fstat(2)
  // about the descriptor when it first allocates one, and the sandbox only
  // allows that for stdout and stderr.
  fputc('\n', stdout);
  fflush(stdout);
  int saved = stdout->_fileno;
  stdout->_fileno = 3;
  fputs("{\"type\":\"done\",\"rc\":0} -- not a frame", stdout);
  fflush(stdout);
  stdout->_fileno = saved;
  return 0;
}
