// The env server's request decoder (rpc::decode_request), byte for byte what
// a client sends. Malformed input is a ProtocolError, never anything else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kforge/core/rpc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kforge::json id;
  try {
    const kforge::rpc::Request req =
        kforge::rpc::decode_request(std::string_view(reinterpret_cast<const char*>(data), size), &id);
    // What the server does next with a request: read params as a document.
    kforge::Document::from_value(req.params, "params").root_object();
  } catch (const kforge::rpc::ProtocolError& e) {
    // Errors are encoded and sent back: that must work for every one.
    (void)kforge::rpc::encode_error(id, e);
  } catch (const kforge::InputError&) {
  }
  return 0;
}
