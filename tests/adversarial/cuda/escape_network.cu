// Exploit: network escape. Opens a TCP connection from kf_forward (to fetch a
// precomputed answer, or to leak the inputs).
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (socket / connect: network); at run time the runner's seccomp filter
// (`sandbox`).
// Task: examples/affine_relu6.
#include <arpa/inet.h>
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 3;
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(8080);
  addr.sin_addr.s_addr = htonl(0x7f000001);
  if (connect(fd, (sockaddr*)&addr, sizeof(addr)) != 0) {
    close(fd);
    return 4;
  }
  char answer[256];
  const ssize_t got = recv(fd, answer, sizeof(answer), 0);
  close(fd);
  return got > 0 ? 0 : 5;
}
