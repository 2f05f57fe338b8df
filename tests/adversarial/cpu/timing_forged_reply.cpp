// Exploit: tampering with timing through the harness's control channel. The
// runner replies `done` on fd 3 when kf_forward returns; the judge stops its
// clock when that reply arrives. This candidate points stdout's FILE at fd 3
// (only allowed symbols: stdout, fwrite, fflush) and sends its own `done`
// frame claiming 1 ns, guessing the request's sequence number by counting
// calls, so the judge would see the call end early.
// Must be caught by: the protocol check (every reply must echo the request's
// seq, and the runner's real reply then arrives out of turn): violation
// `harness_tamper`.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <stdio.h>

static unsigned g_seq = 2;  // setup = 1, bind = 2, then one per call

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  unsigned seq = ++g_seq;
  // {"type": "done", "seq": seq, "rc": 0, "self_ns": 1} in MessagePack.
  unsigned char body[] = {0x84, 0xa4, 't',  'y', 'p', 'e', 0xa4, 'd', 'o', 'n', 'e', 0xa3, 's', 'e', 'q', 0xcd,
                          0,    0,    0xa2, 'r', 'c', 0,   0xa7, 's', 'e', 'l', 'f', '_',  'n', 's', 0x01};
  body[16] = (unsigned char)(seq >> 8);
  body[17] = (unsigned char)seq;
  unsigned char frame[4 + sizeof(body)] = {(unsigned char)sizeof(body), 0, 0, 0};
  for (unsigned i = 0; i < sizeof(body); ++i) frame[4 + i] = body[i];
  // Give stdout its buffer while it still points at fd 1: stdio asks fstat(2)
  // about the descriptor when it first allocates one, and the sandbox only
  // allows that for stdout and stderr.
  fputc('\n', stdout);
  fflush(stdout);
  int saved = stdout->_fileno;
  stdout->_fileno = 3;
  fwrite(frame, 1, sizeof(frame), stdout);
  fflush(stdout);
  stdout->_fileno = saved;
  return 0;
}
