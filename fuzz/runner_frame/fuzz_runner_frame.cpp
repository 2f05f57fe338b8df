// The frame decoder of the judge<->runner channel (exec_common/wire.h): a frame is
// written by the candidate's process, so every byte is hostile.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "exec_common/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const kforge::exec::json body =
        kforge::exec::decode_frame(std::string_view(reinterpret_cast<const char*>(data), size));
    // The judge reads the type first; a frame must survive being looked at.
    (void)body.value("type", kforge::exec::json()).dump(-1, ' ', false, kforge::exec::json::error_handler_t::replace);
  } catch (const kforge::exec::WireError&) {
  }
  return 0;
}
