// Length-prefixed MessagePack frames over a stream socket, with deadlines and
// optional file descriptors (SCM_RIGHTS) attached.
//
// Frame: 4-byte little-endian payload length, then the payload, the MessagePack
// encoding of one JSON object whose "type" names the message. Descriptors ride
// on the first byte of the frame. The executor<->judge and judge<->runner
// channels both use it (docs/execution.md lists the messages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/deadline.h"
#include "kforge/core/unique_fd.h"

namespace kforge::ipc {

using json = nlohmann::json;

// Larger frames are refused: a peer that announces more is broken or hostile.
inline constexpr uint32_t kMaxFrameBytes = 64u << 20;
inline constexpr size_t kMaxFdsPerFrame = 4;

class WireError : public std::runtime_error {
 public:
  enum class Kind { kTimeout, kClosed, kMalformed, kIo };
  WireError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

struct Frame {
  json body;
  std::vector<UniqueFd> fds;  // received descriptors, close-on-exec
  size_t payload_bytes = 0;   // the MessagePack payload's size, header excluded
};

// Encodes a frame into bytes (header + payload); also used by code that must
// write a frame with a single write(2), such as a signal handler's prepared message.
std::vector<uint8_t> encode_frame(const json& body);

// The pure part of recv_frame, without sockets (so that it can be fuzzed):
// decode_frame reads a whole frame (the 4-byte little-endian length, then
// exactly that many payload bytes), decode_frame_payload the payload alone.
// Both accept only one well-formed MessagePack map within the limits
// (kMaxFrameBytes, limits::kMaxMessageDepth); anything else is WireError
// kMalformed saying what is wrong.
json decode_frame(std::string_view bytes);
json decode_frame_payload(std::string_view payload);

// Sends one frame. Never raises SIGPIPE; a closed peer is WireError kClosed.
void send_frame(int fd, const json& body, Deadline deadline, const std::vector<int>& fds = {});

// Receives one frame. A deadline that is never() blocks without poll(2), so the
// sandboxed runner needs no poll syscall while it waits.
//
// `spin_us` > 0: first busy-polls the socket (non-blocking peeks) for up to
// that long before sleeping. A process that sleeps in the kernel pays its
// wake-up when the frame arrives; on the virtualized H200 host that was
// 0.08-0.2 ms per exchange after a few ms of idling (a halted vCPU), enough to
// swamp a GPU kernel's time. Timed exchanges spin on both ends, as CUDA's
// spin synchronization does for the GPU.
Frame recv_frame(int fd, Deadline deadline, int spin_us = 0);

// Creates a connected AF_UNIX stream socketpair, both ends close-on-exec.
void make_socket_pair(UniqueFd* a, UniqueFd* b);

}  // namespace kforge::ipc
