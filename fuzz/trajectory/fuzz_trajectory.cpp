// Fuzz target: reading a trajectory (docs/rollout.md) from a line of JSONL,
// as replay and forks do with files from elsewhere: a Trajectory or an
// InputError naming the field, never a crash; what it accepts serializes
// again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kforge/core/error.h"
#include "kforge/core/trajectory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const kforge::Trajectory t = kforge::parse_trajectory(kforge::Document::from_json_text(text, "<fuzz>"));
    (void)kforge::to_json(t).dump();
  } catch (const kforge::InputError&) {
  }
  return 0;
}
