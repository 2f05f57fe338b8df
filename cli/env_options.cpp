#include <algorithm>

#include "commands.h"
#include "kforge/reward/reward.h"

namespace kforge::cli {

void EnvOptions::add_to(CLI::App& cmd, bool with_mode, bool with_backend) {
  cmd.add_option("--config", config,
                 "Environment config: a YAML/JSON file or a preset of configs/env (default, cpu, cuda). Default: the "
                 "preset named after --backend, else \"default\"");
  if (with_backend) {
    cmd.add_option("--backend", backend, "Backend to run on (overrides the config)")
        ->check(CLI::IsMember({"cpu", "cuda"}));
  }
  if (with_mode) {
    cmd.add_option("--mode", mode,
                   "Solution mode for raw source files (default: the backend's, cpp on cpu, cuda on cuda); "
                   ".json/.yaml solution documents carry their own")
        ->check(CLI::IsMember(solution_mode_names()));
  }
  cmd.add_option("--reward", reward, "Reward function: a preset of configs/rewards or a path to a reward YAML");
  cmd.add_option("--seeds", seeds, "Random seeds per shape variant for verification (overrides the config)")
      ->check(CLI::Range(1, 1000));
}

env::EnvConfig EnvOptions::load() const {
  const std::string name = !config.empty() ? config : (!backend.empty() ? backend : "default");
  env::EnvConfig c = env::load_env_config(name);
  if (!backend.empty()) {
    const env::BackendKind b = env::parse_backend(backend);
    if (b != c.backend) {
      c.backend = b;
      c.default_mode = env::default_env_config(b).default_mode;
    }
  }
  if (!mode.empty()) {
    for (SolutionMode m : {SolutionMode::kCuda, SolutionMode::kNvrtc, SolutionMode::kTorchExt, SolutionMode::kCpp}) {
      if (solution_mode_name(m) == mode) c.default_mode = m;
    }
  }
  if (!reward.empty()) {
    c.reward.function = reward;
    // The config's per-step terms belong to its own reward function; keep
    // those the new one also has.
    const std::vector<std::string> names = reward::RewardFunction::load(reward).component_names();
    std::vector<std::string> kept;
    for (const auto& t : c.reward.step_terms) {
      if (std::find(names.begin(), names.end(), t) != names.end()) kept.push_back(t);
    }
    c.reward.step_terms = kept;
  }
  if (seeds > 0) c.eval.seeds = seeds;
  return c;
}

}  // namespace kforge::cli
