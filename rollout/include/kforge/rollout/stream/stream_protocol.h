// The trajectory stream's wire messages, version 1 (trainer_bridge/STREAM.md):
// rollout workers (TrajectorySender, DEALER) push trajectories to the trainer
// (TrajectoryReceiver or kforge.TrajectoryStream, ROUTER), which acknowledges
// each once the trainer holds it and grants credit for more.
//
// One ZeroMQ frame per message, one MessagePack map per frame, a "type" key
// saying which message it is and "v" the protocol version. Keys a decoder does
// not know are ignored (additive changes keep the version); missing or
// mistyped keys are a DecodeError naming the key.
//
// The codec is separate from the sockets so that every malformed input can be
// tested byte by byte, and so that both C++ ends share one encoding.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kforge::rollout::stream {

inline constexpr int kVersion = 1;
// Versions this build speaks, newest first (hello lists them; the receiver
// picks one).
const std::vector<int>& supported_versions();

// Bounds on what a peer may send; a message beyond them is a DecodeError.
inline constexpr size_t kMaxWorkerIdBytes = 128;
inline constexpr size_t kMaxInstanceBytes = 64;
inline constexpr size_t kMaxTrajectoryIdBytes = 1024;
inline constexpr size_t kMaxAckRanges = 65536;
inline constexpr size_t kMaxVersions = 16;
inline constexpr size_t kMaxErrorMessageBytes = 4096;
// Nesting allowed inside a trajectory's data (a trajectory nests ~10 levels).
inline constexpr int kMaxDataDepth = 128;

// Error codes a receiver sends (STREAM.md, "Errors").
enum class ErrorCode {
  kBadMessage,          // not one well-formed message: the message was dropped
  kUnsupportedVersion,  // hello listed no version the receiver speaks
  kNoSession,           // traj/heartbeat from a connection without a welcome: send hello
  kWorkerConflict,      // another spool (instance) already streams as this worker id
  kRejected,            // this traj (seq named) will never be accepted: set it aside
  kCreditExceeded,      // more trajs in flight than the credit granted: the traj was dropped
  kTooManyWorkers,      // the receiver's session limit is reached: retry later
  kShuttingDown,        // the receiver is stopping: reconnect later
};
const std::string& error_code_name(ErrorCode code);
std::optional<ErrorCode> error_code_from_name(std::string_view name);
std::vector<std::string> error_code_names();

// Sender -> receiver.
struct Hello {
  std::vector<int> versions = supported_versions();
  std::string worker;    // stable across restarts; names the sequence space
  std::string instance;  // random id of the spool; changes only when the spool is new
  uint32_t heartbeat_ms = 1000;
  uint64_t next_seq = 1;  // informational: the next seq the sender will assign
  uint64_t unacked = 0;   // informational: trajectories waiting for an ack
  std::string software;
};
struct Traj {
  uint64_t seq = 0;  // >= 1, per worker, assigned once and never reused
  std::string id;    // the trajectory's id
  std::string data;  // the trajectory object, MessagePack-encoded (a map)
};
struct Heartbeat {};
struct Bye {};

// Receiver -> sender.
struct Welcome {
  int version = kVersion;
  std::string receiver;  // the receiver's instance id, for logs
  uint64_t credit = 0;   // trajs the sender may have in flight (sent, not acked)
  uint32_t heartbeat_ms = 1000;
  uint64_t max_message_bytes = 0;
  uint64_t acked_through = 0;  // every seq <= this of the worker is acknowledged
};
struct Ack {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // inclusive [first, last]
};
struct Credit {
  uint64_t credit = 0;
};
struct Error {
  std::string code;  // an ErrorCode name; unknown names are kept as sent
  std::string message;
  std::optional<uint64_t> seq;
  std::vector<int> versions;  // with unsupported_version: what the receiver speaks
};

using Message = std::variant<Hello, Traj, Heartbeat, Bye, Welcome, Ack, Credit, Error>;

// The "type" string of a message ("hello", "traj", ...).
std::string_view type_name(const Message& message);

// A message that is not one well-formed, bounded message of this protocol.
// `field` names the offending key ("seq", "data"); empty when the bytes as a
// whole are at fault.
class DecodeError : public std::runtime_error {
 public:
  DecodeError(const std::string& message, std::string field = "")
      : std::runtime_error(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }
  // For a traj whose "seq" could be read but whose id or data cannot: the
  // receiver answers `rejected` with it, so that the sender sets it aside.
  std::optional<uint64_t> traj_seq;

 private:
  std::string field_;
};

// Decodes one frame. Hello is accepted with any "v" (it negotiates); every
// other message must carry a version this build speaks. A traj's data must be
// a well-formed MessagePack map no deeper than kMaxDataDepth.
Message decode(std::string_view frame);

std::string encode(const Message& message, int version = kVersion);
// encode(Traj) without copying the payload into a Traj first.
std::string encode_traj(uint64_t seq, std::string_view id, std::string_view data, int version = kVersion);
// Everything of that frame before the data's bytes: the frame is this
// followed by the data (so that a sender can build it in place).
std::string encode_traj_header(uint64_t seq, std::string_view id, size_t data_bytes, int version = kVersion);
// Bytes encode_traj adds around the payload, at most (for size checks).
size_t traj_overhead(size_t id_bytes);

// Ranges covering `seqs` (sorted or not, duplicates allowed), merged.
std::vector<std::pair<uint64_t, uint64_t>> to_ranges(std::vector<uint64_t> seqs);

// Identifier rules, shared by the sender's configuration checks and the
// decoder: worker ids are 1..128 bytes of [A-Za-z0-9._:@+-], instances
// 1..64 bytes of [A-Za-z0-9._-]. "" when valid, else what is wrong.
std::string check_worker_id(std::string_view worker);
std::string check_instance(std::string_view instance);

}  // namespace kforge::rollout::stream
