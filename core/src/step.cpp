#include "kforge/core/step.h"

namespace kforge {

json to_json(const Observation& obs) { return {{"text", obs.text}, {"data", obs.data}}; }

}  // namespace kforge
