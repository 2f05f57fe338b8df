// Exploit: tampering with harness state: a frame of 200,000 nested one-element
// arrays on the control socket. A recursive decoder overflows its stack on
// it: the judge died with SIGSEGV, the request became a system error and
// every env on the device lost its judge.
// Must be caught by: the bounded decoder (kforge_msgpack, 128 levels):
// violation `harness_tamper`, the judge survives.
// Task: chain.
#include <kforge/kernel_abi.h>

#include "control_socket.h"

static unsigned char g_frame[4 + 200001];

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  kf_chain(in, out);
  const uint32_t n = sizeof(g_frame) - 4;
  kf_frame_header(g_frame, n);
  for (uint32_t i = 0; i < n - 1; ++i) g_frame[4 + i] = 0x91;  // array of one element
  g_frame[4 + n - 1] = 0xc0;                                   // nil
  kf_control_write(g_frame, sizeof(g_frame));
  return 0;
}
