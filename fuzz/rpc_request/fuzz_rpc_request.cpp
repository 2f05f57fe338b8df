// The env server's request decoder (rpc::decode_request), byte for byte what
// a client sends. Malformed input is a ProtocolError, never anything else.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kforge/core/rpc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The server's peek at an unread request's id agrees with the decoder
  // whenever both find one.
  const std::optional<uint64_t> peeked = kforge::rpc::peek_request_id(bytes);
  kforge::json id;
  struct CheckPeek {
    const std::optional<uint64_t>& peeked;
    const kforge::json& id;
    ~CheckPeek() {
      if (peeked && !id.is_null() && id.get<uint64_t>() != *peeked) __builtin_trap();
    }
  } check{peeked, id};
  try {
    const kforge::rpc::Request req = kforge::rpc::decode_request(bytes, &id);
    // What the server does next with a request: read params as a document.
    kforge::Document::from_value(req.params, "params").root_object();
  } catch (const kforge::rpc::ProtocolError& e) {
    // Errors are encoded and sent back: that must work for every one.
    (void)kforge::rpc::encode_error(id, e);
  } catch (const kforge::InputError&) {
  }
  return 0;
}
