// Exploit: tampering with harness state: a frame header announcing 4 GiB on
// the control socket, so that the judge allocates it or waits for it.
// Must be caught by: the frame size limit (64 MiB), checked on the header
// before anything is allocated: violation `harness_tamper`.
// Task: chain.
#include <kforge/kernel_abi.h>

#include "control_socket.h"

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  kf_chain(in, out);
  static const unsigned char header[] = {0xff, 0xff, 0xff, 0xff, 0x81, 0xa4, 't', 'y', 'p', 'e'};
  kf_control_write(header, sizeof(header));
  return 0;
}
