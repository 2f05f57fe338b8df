#include "kforge/core/step.h"

namespace kforge {

json to_json(const Observation& obs) { return {{"text", obs.text}, {"data", obs.data}}; }

json to_json(const StepResult& step) {
  return {{"observation", to_json(step.observation)},
          {"reward", step.reward},
          {"terminated", step.terminated},
          {"truncated", step.truncated},
          {"info", step.info}};
}

}  // namespace kforge
