// Fuzz target: reading a trajectory (docs/rollout.md) from a line of JSONL,
// as replay and forks do with files from elsewhere, and then its typed info
// parts (rollout/trajectory_info.h), as a fork reads its parent: a Trajectory
// and its infos or an InputError naming the field, never a crash; what it
// accepts serializes again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kforge/core/error.h"
#include "kforge/core/trajectory.h"
#include "kforge/rollout/trajectory_info.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const kforge::Trajectory t = kforge::parse_trajectory(kforge::Document::from_json_text(text, "<fuzz>"));
    (void)kforge::to_json(t).dump();
    (void)kforge::rollout::to_json(kforge::rollout::trajectory_info_from_json(t.info, "<fuzz> info")).dump();
    for (const kforge::Turn& turn : t.turns) {
      (void)kforge::rollout::to_json(kforge::rollout::turn_info_from_json(turn.info, "<fuzz> turn info")).dump();
    }
  } catch (const kforge::InputError&) {
  }
  return 0;
}
