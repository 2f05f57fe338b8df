// Shared by the candidates that write to the runner's control socket (fd 3):
// stdout's FILE is pointed at fd 3 for the write, so the candidate imports
// nothing but stdio (allowed) and makes no system call the sandbox refuses.
// What the judge must do with whatever arrives there: blame the candidate
// (docs/threat-model.md, "Who is to blame").
#ifndef KFORGE_TESTS_ADVERSARIAL_CONTROL_SOCKET_H_
#define KFORGE_TESTS_ADVERSARIAL_CONTROL_SOCKET_H_

#include <stdint.h>
#include <stdio.h>

// Bytes as they are, in one or more writes.
static void kf_control_write(const void* data, size_t n) {
  // Give stdout its buffer while it still points at fd 1: stdio asks fstat(2)
  // about the descriptor when it first allocates one, and the sandbox only
  // allows that for stdout and stderr.
  fputc('\n', stdout);
  fflush(stdout);
  int saved = stdout->_fileno;
  stdout->_fileno = 3;
  fwrite(data, 1, n, stdout);
  fflush(stdout);
  stdout->_fileno = saved;
}

// The 4-byte little-endian length header of a frame.
static void kf_frame_header(unsigned char* out, uint32_t n) {
  out[0] = (unsigned char)n;
  out[1] = (unsigned char)(n >> 8);
  out[2] = (unsigned char)(n >> 16);
  out[3] = (unsigned char)(n >> 24);
}

// One frame: header, then `body` (MessagePack the caller encoded).
static void kf_control_frame(const unsigned char* body, uint32_t n) {
  static unsigned char frame[4096];
  if (n + 4 > sizeof(frame)) return;
  kf_frame_header(frame, n);
  for (uint32_t i = 0; i < n; ++i) frame[4 + i] = body[i];
  kf_control_write(frame, n + 4);
}

// The sequence number of the judge's request: setup = 1, bind = 2, then one
// per call (the chain task has one shape, so one bind before verification).
static unsigned kf_seq_of_call(unsigned call_index) { return 3 + call_index; }

// The chain task's honest computation: out = relu(x * y + z).
static void kf_chain(const kf_tensor* in, kf_tensor* out) {
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
}

#endif  // KFORGE_TESTS_ADVERSARIAL_CONTROL_SOCKET_H_
