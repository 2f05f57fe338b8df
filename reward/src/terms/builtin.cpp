#include "terms/builtin.h"

namespace kforge::reward::internal {

void register_builtin_terms(TermRegistry& registry) {
  registry.add("tiered", make_tiered);
  registry.add("log_speedup", make_log_speedup);
  registry.add("linear_capped", make_linear_capped);
  registry.add("contrastive", make_contrastive);
  registry.add("energy", make_energy);
  registry.add("correctness", make_correctness);
  registry.add("violation_penalty", make_violation_penalty);
  registry.add("failure_penalty", make_failure_penalty);
  registry.add("turn_cost", make_turn_cost);
}

}  // namespace kforge::reward::internal
