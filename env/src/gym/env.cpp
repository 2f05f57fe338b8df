#include "kforge/env/env.h"

namespace kforge::env {

Env::Env(EnvConfig config, EnvServices services) : pool_(std::move(config), 1, std::move(services)) {}

ResetResult Env::reset(const TaskSpec& task, uint64_t seed, const ResetOptions& options) {
  return pool_.reset(0, task, seed, options);
}

StepResult Env::step(const Action& action) {
  pool_.send({action}, {0});
  // One slot, one step in flight: the next result is this step's.
  return std::move(pool_.recv(1).at(0).result);
}

StepResult Env::step_tool_call(const json& call) {
  pool_.send_tool_calls({call}, {0});
  return std::move(pool_.recv(1).at(0).result);
}

}  // namespace kforge::env
