// Exploit: a file escape: append to a system file (or read one the policy
// should not see) with open(2).
// Must be caught by: load-time inspection, violation `forbidden_symbol`
// (open, "file access"); the running filter refuses opens.
// Task: chain.
#include <fcntl.h>
#include <kforge/kernel_abi.h>
#include <unistd.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  int fd = open("/etc/passwd", O_WRONLY | O_APPEND);
  if (fd < 0) return 1;
  close(fd);
  return 0;
}
