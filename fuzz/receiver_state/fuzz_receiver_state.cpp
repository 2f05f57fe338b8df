// The receiver's state files (receiver_state.h) on arbitrary bytes, as the
// ack log a killed or damaged receiver may leave. Loading succeeds (a torn
// last line dropped) or fails with SystemError naming the line; after a
// successful load, acknowledging works.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"
#include "kforge/rollout/stream/receiver_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const fs::path dir = fs::temp_directory_path() / ("kforge-fuzz-rstate-" + std::to_string(::getpid()));
  kforge::remove_tree(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "acks.log", std::ios::binary) << std::string(reinterpret_cast<const char*>(data), size);
  try {
    kforge::rollout::ReceiverState state(dir);
    state.acknowledge({{"fuzz", {1, 2, 3}}});
    if (!state.acknowledged("fuzz", 2)) __builtin_trap();
  } catch (const kforge::SystemError&) {
  }
  return 0;
}
