// Exploit: tampering with harness state: garbage on the control socket, a
// plausible 64-byte length followed by bytes that are no MessagePack at all
// (0xc1 is the one byte MessagePack never uses), in the hope of confusing the
// decoder or the judge's state.
// Must be caught by: the decoder's well-formedness check: violation
// `harness_tamper`.
// Task: chain.
#include <kforge/kernel_abi.h>

#include "control_socket.h"

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  kf_chain(in, out);
  unsigned char bytes[4 + 64];
  kf_frame_header(bytes, 64);
  unsigned state = 12345;
  for (int i = 0; i < 64; ++i) {
    state = state * 1103515245u + 12345u;
    bytes[4 + i] = (unsigned char)(state >> 16);
  }
  bytes[4] = 0xc1;
  kf_control_write(bytes, sizeof(bytes));
  return 0;
}
