// The sender's spool recovery (trajectory_spool.h) on arbitrary bytes: the
// input is split into a segment file and an ack log, as a killed or damaged
// worker may leave them. Opening either recovers (and appends work after)
// or fails with SystemError; nothing else.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"
#include "kforge/rollout/stream/trajectory_spool.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const fs::path dir = fs::temp_directory_path() / ("kforge-fuzz-spool-" + std::to_string(::getpid()));
  kforge::remove_tree(dir);
  fs::create_directories(dir);
  // Input: a 4-byte little-endian length, that many bytes of segment, and
  // the rest as the ack log.
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  uint32_t segment = 0;
  for (size_t i = 0; i < 4 && i < size; ++i)
    segment |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  const std::string body = size > 4 ? bytes.substr(4) : std::string();
  const size_t split = std::min<size_t>(segment, body.size());
  std::ofstream(dir / "spool.json") << R"({"format": 1, "worker": "fuzz", "instance": "abc"})";
  std::ofstream(dir / "seg-00000000000000000001.kfs", std::ios::binary) << body.substr(0, split);
  std::ofstream(dir / "acks.log", std::ios::binary) << body.substr(split);
  try {
    kforge::rollout::SpoolOptions o;
    o.dir = dir;
    o.worker_id = "fuzz";
    o.max_bytes = 1 << 20;
    kforge::rollout::TrajectorySpool spool(o);
    for (const auto& [seq, rec] : spool.pending()) (void)spool.read(seq);
    const uint64_t seq = spool.append("after", std::string("\x80", 1));
    if (spool.read(seq) != std::string("\x80", 1)) __builtin_trap();
  } catch (const kforge::SystemError&) {
  }
  return 0;
}
