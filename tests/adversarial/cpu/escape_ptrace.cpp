// Exploit: editing the harness from outside: attach to the parent (the judge)
// with ptrace and rewrite its timing or its reference outputs.
// Must be caught by: load-time inspection, violation `forbidden_symbol`
// (ptrace, "process inspection"); the runner has no capabilities, the judge
// is not dumpable, and the running filter refuses ptrace.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <sys/ptrace.h>
#include <unistd.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  return ptrace(PTRACE_ATTACH, getppid(), 0, 0) == 0 ? 0 : 1;
}
