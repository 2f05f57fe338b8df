// Exploit: calling libraries and programs outside the allow-list through
// system(3): run a Python one-liner that computes the answer with NumPy.
// Must be caught by: load-time inspection, violation `forbidden_symbol`
// (system, "processes"); fork/exec are refused by the running filter too.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <stdlib.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return system("python3 -c 'import numpy'"); }
