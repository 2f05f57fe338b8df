// Exploit: a network escape: connect to a service that computes the answer
// (or report the inputs out).
// Must be caught by: load-time inspection, violation `forbidden_symbol`
// (socket/connect, "network"). The runner also sits in its own network
// namespace, and the running filter refuses socket(2).
// Task: chain.
#include <arpa/inet.h>
#include <kforge/kernel_abi.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return 1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(8080);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = connect(s, (sockaddr*)&addr, sizeof(addr));
  close(s);
  return rc == 0 ? 0 : 1;
}
