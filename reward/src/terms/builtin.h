// The terms that ship with KernelForge. Each lives in its own file under
// terms/ and exposes only its factory; register_builtin_terms() is the one
// list of them (static self-registration would be dropped by the linker from
// a static library).
#pragma once

#include <memory>

#include "kforge/reward/term.h"

namespace kforge::reward::internal {

std::unique_ptr<RewardTerm> make_tiered(ObjectReader& params);
std::unique_ptr<RewardTerm> make_log_speedup(ObjectReader& params);
std::unique_ptr<RewardTerm> make_linear_capped(ObjectReader& params);
std::unique_ptr<RewardTerm> make_contrastive(ObjectReader& params);
std::unique_ptr<RewardTerm> make_energy(ObjectReader& params);
std::unique_ptr<RewardTerm> make_correctness(ObjectReader& params);
std::unique_ptr<RewardTerm> make_violation_penalty(ObjectReader& params);
std::unique_ptr<RewardTerm> make_failure_penalty(ObjectReader& params);
std::unique_ptr<RewardTerm> make_turn_cost(ObjectReader& params);

void register_builtin_terms(TermRegistry& registry);

}  // namespace kforge::reward::internal
