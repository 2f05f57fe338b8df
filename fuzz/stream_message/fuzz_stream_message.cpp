// The trajectory stream's message decoder (rollout stream_protocol.h), byte
// for byte what a peer sends to a sender or a receiver. Malformed input is a
// DecodeError, never anything else; what decodes re-encodes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kforge/rollout/stream/stream_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace stream = kforge::rollout::stream;
  try {
    const stream::Message m = stream::decode(std::string_view(reinterpret_cast<const char*>(data), size));
    // The receiver answers and the sender acts on what decodes: encoding it
    // again must work and give the same type.
    if (stream::decode(stream::encode(m)).index() != m.index()) __builtin_trap();
  } catch (const stream::DecodeError& e) {
    // Answered as an error message: that must encode.
    (void)stream::encode(stream::Error{"bad_message", e.what(), e.traj_seq, {}});
  }
  return 0;
}
