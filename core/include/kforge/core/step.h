// Observations and step results (Gymnasium semantics, docs/architecture.md#environment).
#pragma once

#include <string>

#include "kforge/core/document.h"

namespace kforge {

struct Observation {
  std::string text;          // chat-ready, for the policy
  json data = json::object();  // the same facts, structured
};

struct StepResult {
  Observation observation;
  double reward = 0.0;
  bool terminated = false;  // the episode ended by submit
  bool truncated = false;   // turn or time budget reached
  // Always holds "reward_components" (name -> value) plus timings and the
  // measurement the reward was computed from.
  json info = json::object();
};

json to_json(const Observation& obs);
json to_json(const StepResult& step);

}  // namespace kforge
