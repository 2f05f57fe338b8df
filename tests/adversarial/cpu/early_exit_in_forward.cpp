// Exploit: leaving early: exit(0) inside kf_forward, so that the runner ends
// with a success status before any output is checked, hoping the harness
// reads a clean exit as its own failure (a system error, which costs nothing).
// Must be caught by: whatever happens while the candidate's runner is alive
// is the candidate's: outcome `crash` ("exit code 0 in kf_forward"), turn
// counted.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <stdlib.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { exit(0); }
