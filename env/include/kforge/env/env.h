// Env: the synchronous, single-episode API (Gymnasium's reset/step), a thin
// layer over a one-slot EnvPool with the same semantics (env_pool.h).
//
//   Env env(load_env_config("cpu"));
//   auto [obs, info] = env.reset(task, /*seed=*/0);
//   StepResult r = env.step_tool_call(call);   // or env.step(action)
//   // r.reward, r.terminated, r.truncated, r.info.reward_components (step_result.h)
#pragma once

#include <memory>

#include "kforge/core/action.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/env_config.h"
#include "kforge/env/env_pool.h"

namespace kforge::env {

class Env {
 public:
  explicit Env(EnvConfig config, EnvServices services = {});

  ResetResult reset(const TaskSpec& task, uint64_t seed = 0, const ResetOptions& options = {});
  // Blocks until the step is done. InputError before reset or after the
  // episode finished (see env_pool.h for what is an error and what is an
  // observation).
  StepResult step(const Action& action);
  StepResult step_tool_call(const json& call);

  const EnvConfig& config() const { return pool_.config(); }
  const Toolset& tools() const { return pool_.tools(); }

 private:
  EnvPool pool_;
};

}  // namespace kforge::env
