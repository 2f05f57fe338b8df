// The frame decoder of the judge<->runner channel (ipc/wire.h): a frame is
// written by the candidate's process, so every byte is hostile.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ipc/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nlohmann::json body = kforge::ipc::decode_frame(std::string_view(reinterpret_cast<const char*>(data), size));
    // The judge reads the type first; a frame must survive being looked at.
    (void)body.value("type", nlohmann::json()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const kforge::ipc::WireError&) {
  }
  return 0;
}
