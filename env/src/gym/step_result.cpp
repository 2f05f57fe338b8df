#include "kforge/env/step_result.h"

namespace kforge::env {

json ResetInfo::budgets_json() const { return {{"max_turns", max_turns}, {"time_budget_s", time_budget_s}}; }

json ResetInfo::reward_json() const { return {{"function", reward_function}, {"source", reward_source}}; }

json to_json(const StepResult& result) {
  return {{"observation", to_json(result.observation)},
          {"reward", result.reward},
          {"terminated", result.terminated},
          {"truncated", result.truncated},
          {"info", to_json(result.info)}};
}

json to_json(const ResetInfo& info) {
  json out = {{"env_id", info.env_id},
              {"episode", info.episode},
              {"task_id", info.task_id},
              {"seed", info.seed},
              {"backend", info.backend},
              {"solution_mode", info.solution_mode},
              {"budgets", info.budgets_json()},
              {"tools", info.tools},
              {"reward", info.reward_json()},
              // A reset pays nothing; the key is there so that every info a
              // client sees has reward_components.
              {"reward_components", {{"total", 0.0}}}};
  if (info.resumed) {
    out["resumed"] = {{"turns_used", info.resumed->turns_used},
                      {"time_used_s", info.resumed->time_used_s},
                      {"compile_errors", info.resumed->compile_errors},
                      {"episode_return", info.resumed->episode_return},
                      {"has_solution", info.resumed->has_solution}};
  }
  out["reference_check"] = {{"status", info.reference_check_status}};
  if (!info.reference_check_problem.empty()) out["reference_check"]["problem"] = info.reference_check_problem;
  return out;
}

}  // namespace kforge::env
