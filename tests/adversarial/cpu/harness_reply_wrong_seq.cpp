// Exploit: tampering with timing through the harness's control channel: a
// `done` reply sent ahead of the runner's real one, numbered for a later
// request (out of order), so that the judge's clock stops early now and the
// real reply is taken for a later call.
// Must be caught by: every reply must echo its request's sequence number:
// violation `harness_tamper`.
// Task: chain.
#include <kforge/kernel_abi.h>

#include "control_socket.h"

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  kf_chain(in, out);
  // {"type": "done", "seq": 9999, "rc": 0, "self_ns": 1}
  static const unsigned char body[] = {0x84, 0xa4, 't', 'y', 'p',  'e',  0xa4, 'd',  'o', 'n', 'e',
                                       0xa3, 's',  'e', 'q', 0xcd, 0x27, 0x0f, 0xa2, 'r', 'c', 0x00,
                                       0xa7, 's',  'e', 'l', 'f',  '_',  'n',  's',  0x01};
  kf_control_frame(body, sizeof(body));
  return 0;
}
