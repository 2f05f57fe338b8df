// Statistical ties between speedups (docs/rewards.md, "Noise"): the
// homogeneity test behind statistically_tied (term.h) and the tie classes
// that RewardFunction::pool_ties gives one reward each.
//
// Why a homogeneity test of the whole class and not pairwise tests: with
// pairwise tests at 5 % (each member against the class's best, or against
// its pooled estimate), a group of 8 identical kernels timed with noise was
// split in 20-30 % of groups (simulated: sign-test intervals of 5-40 rounds,
// 10 % noise per sample), the many comparisons adding up. Cochran's Q tests
// "all equal" once per class: 4-9 % of such groups split (the excess over 5 %
// is the noise in each interval's width), while two levels 15 % apart were
// told apart exactly in 33 % of groups at 20 rounds and 77 % at 40.
#pragma once

#include <cstddef>
#include <vector>

#include "kforge/reward/reward.h"

namespace kforge::reward::internal {

// The p-quantile of chi-square with `dof` >= 1 degrees of freedom
// (regularized incomplete gamma, inverted by bisection; 1e-9 relative).
double chi_square_quantile(double p, int dof);

// The normal quantile z with P(|Z| <= z) = coverage.
double two_sided_normal_quantile(double coverage);

// Tie classes of the members that have speed evidence: taken best point
// first, a member joins the class being formed when the class with it is
// still statistically tied (statistically_tied), else it starts the next
// class. Indices into `members`; members without evidence are in none.
std::vector<std::vector<size_t>> tie_classes(const std::vector<GroupMember>& members);

}  // namespace kforge::reward::internal
