#include "ipc/wire.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

#include "kforge/core/errno_text.h"
#include "kforge/core/msgpack.h"

namespace kforge::ipc {
namespace {

[[noreturn]] void fail_io(const char* what) {
  int err = errno;
  if (err == EPIPE || err == ECONNRESET) throw WireError(WireError::Kind::kClosed, std::string(what) + ": peer closed");
  throw WireError(WireError::Kind::kIo, std::string(what) + ": " + errno_text(err));
}

// Waits until `events` are ready or the deadline passes.
void wait_ready(int fd, short events, const Deadline& deadline, const char* what) {
  while (true) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, deadline.poll_timeout_ms());
    if (r > 0) return;  // readiness, hangup and errors all surface in the next syscall
    if (r == 0) {
      if (deadline.expired()) throw WireError(WireError::Kind::kTimeout, std::string(what) + ": timed out");
      continue;
    }
    if (errno != EINTR) fail_io(what);
  }
}

void collect_fds(msghdr* msg, std::vector<UniqueFd>* out) {
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(c);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, data + i * sizeof(int), sizeof(int));
      out->emplace_back(fd);
    }
  }
}

// Reads exactly `len` bytes, gathering any descriptors that arrive.
void read_exact(int fd, uint8_t* buf, size_t len, const Deadline& deadline, std::vector<UniqueFd>* fds) {
  size_t got = 0;
  while (got < len) {
    int flags = MSG_CMSG_CLOEXEC;
    if (!deadline.is_never()) {
      wait_ready(fd, POLLIN, deadline, "receive");
      flags |= MSG_DONTWAIT;
    }
    iovec iov{buf + got, len - got};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerFrame)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t r = ::recvmsg(fd, &msg, flags);
    if (r > 0) {
      collect_fds(&msg, fds);
      if (msg.msg_flags & MSG_CTRUNC) throw WireError(WireError::Kind::kMalformed, "receive: too many descriptors");
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) {
      throw WireError(WireError::Kind::kClosed,
                      got == 0 ? "receive: peer closed" : "receive: peer closed in the middle of a frame");
    }
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    fail_io("receive");
  }
}

// Peeks without blocking until a byte is there, the peer closed or failed,
// `spin_us` passed, or the deadline passed; the caller's normal receive then
// finds out which. recvfrom only: the runner's filter allows it on its socket.
void spin_until_readable(int fd, int spin_us, const Deadline& deadline) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
  while (std::chrono::steady_clock::now() < until && !deadline.expired()) {
    uint8_t byte;
    ssize_t r = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r >= 0) return;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return;
  }
}

}  // namespace

std::vector<uint8_t> encode_frame(const json& body) {
  std::vector<uint8_t> payload = json::to_msgpack(body);
  if (payload.size() > kMaxFrameBytes) {
    throw WireError(WireError::Kind::kMalformed, "frame of " + std::to_string(payload.size()) + " bytes is too large");
  }
  auto n = static_cast<uint32_t>(payload.size());
  std::vector<uint8_t> out(4 + payload.size());
  out[0] = static_cast<uint8_t>(n);
  out[1] = static_cast<uint8_t>(n >> 8);
  out[2] = static_cast<uint8_t>(n >> 16);
  out[3] = static_cast<uint8_t>(n >> 24);
  std::memcpy(out.data() + 4, payload.data(), payload.size());
  return out;
}

void send_frame(int fd, const json& body, Deadline deadline, const std::vector<int>& fds) {
  if (fds.size() > kMaxFdsPerFrame) throw WireError(WireError::Kind::kMalformed, "send: too many descriptors");
  std::vector<uint8_t> bytes = encode_frame(body);
  size_t sent = 0;
  bool fds_sent = fds.empty();
  while (sent < bytes.size()) {
    int flags = MSG_NOSIGNAL;
    if (!deadline.is_never()) {
      wait_ready(fd, POLLOUT, deadline, "send");
      flags |= MSG_DONTWAIT;
    }
    iovec iov{bytes.data() + sent, bytes.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerFrame)];
    if (!fds_sent) {
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t r = ::sendmsg(fd, &msg, flags);
    if (r > 0) {
      sent += static_cast<size_t>(r);
      fds_sent = true;
      continue;
    }
    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    fail_io("send");
  }
}

Frame recv_frame(int fd, Deadline deadline, int spin_us) {
  if (spin_us > 0) spin_until_readable(fd, spin_us, deadline);
  Frame frame;
  uint8_t header[4];
  read_exact(fd, header, sizeof(header), deadline, &frame.fds);
  uint32_t n = static_cast<uint32_t>(header[0]) | (static_cast<uint32_t>(header[1]) << 8) |
               (static_cast<uint32_t>(header[2]) << 16) | (static_cast<uint32_t>(header[3]) << 24);
  if (n > kMaxFrameBytes) {
    throw WireError(WireError::Kind::kMalformed, "receive: frame announces " + std::to_string(n) + " bytes");
  }
  std::vector<uint8_t> payload(n);
  read_exact(fd, payload.data(), n, deadline, &frame.fds);
  frame.payload_bytes = n;
  frame.body = decode_frame_payload(std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size()));
  return frame;
}

json decode_frame_payload(std::string_view payload) {
  // Bounded: a runner's frame is the candidate's text, and nlohmann's decoder
  // recurses once per nesting level (msgpack.h).
  json body;
  try {
    body = msgpack::decode(payload);
  } catch (const msgpack::DecodeError& e) {
    throw WireError(WireError::Kind::kMalformed, std::string("receive: payload is not MessagePack: ") + e.what());
  }
  if (!body.is_object()) {
    throw WireError(WireError::Kind::kMalformed, "receive: payload is not a MessagePack map");
  }
  return body;
}

json decode_frame(std::string_view bytes) {
  if (bytes.size() < 4) {
    throw WireError(WireError::Kind::kMalformed, "receive: " + std::to_string(bytes.size()) +
                                                     " bytes are not a frame (a frame starts with a 4-byte length)");
  }
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint32_t n = static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 8) |
                     (static_cast<uint32_t>(b[2]) << 16) | (static_cast<uint32_t>(b[3]) << 24);
  if (n > kMaxFrameBytes) {
    throw WireError(WireError::Kind::kMalformed, "receive: frame announces " + std::to_string(n) + " bytes");
  }
  if (bytes.size() - 4 != n) {
    throw WireError(WireError::Kind::kMalformed, "receive: frame announces " + std::to_string(n) + " bytes but holds " +
                                                     std::to_string(bytes.size() - 4));
  }
  return decode_frame_payload(bytes.substr(4));
}

void make_socket_pair(UniqueFd* a, UniqueFd* b) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) fail_io("socketpair");
  a->reset(sv[0]);
  b->reset(sv[1]);
}

}  // namespace kforge::ipc
