// Observations (Gymnasium semantics, docs/architecture.md#environment). The
// step and reset results that carry them, with their typed infos, are the
// environment's (env/include/kforge/env/step_result.h): core cannot name the
// env and reward types a step's info is made of.
#pragma once

#include <string>

#include "kforge/core/document.h"

namespace kforge {

struct Observation {
  std::string text;            // chat-ready, for the policy
  json data = json::object();  // the same facts, structured
};

json to_json(const Observation& obs);

}  // namespace kforge
