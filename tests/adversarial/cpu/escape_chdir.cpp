// Exploit: escaping the scratch directory with chdir("..") (and later relative
// paths that land in the judge's or the executor's directories).
// Must be caught by: load-time inspection, violation `forbidden_symbol`
// (chdir); the running filter refuses chdir too.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <unistd.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return chdir("..") == 0 ? 0 : 1; }
