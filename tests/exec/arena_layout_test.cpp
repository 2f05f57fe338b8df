// Arena layout: guard pages around every tensor, tensors end-aligned.
#include "common/arena_layout.h"

#include <gtest/gtest.h>

namespace kforge::exec {
namespace {

TEST(ArenaLayout, EveryTensorIsFollowedByAGuardPage) {
  ArenaLayout l = plan_arena({100, 8192, 0}, 4096, 64);
  ASSERT_EQ(l.regions.size(), 3u);
  ASSERT_EQ(l.guards.size(), 4u);
  EXPECT_EQ(l.guards.front().first, 0u);
  for (size_t i = 0; i < l.regions.size(); ++i) {
    EXPECT_EQ(l.regions[i].begin % 4096, 0u);
    EXPECT_EQ(l.regions[i].begin, l.guards[i].first + l.guards[i].second);
    EXPECT_EQ(l.guards[i + 1].first, l.regions[i].begin + l.regions[i].capacity);
  }
  EXPECT_EQ(l.size, l.guards.back().first + 4096);
  EXPECT_EQ(l.regions[1].capacity, 8192u);
  EXPECT_EQ(l.regions[2].capacity, 4096u);  // empty tensors still get a page
}

TEST(ArenaLayout, TensorsEndWithinOneAlignmentOfTheGuard) {
  ArenaLayout l = plan_arena({100, 4096}, 4096, 64);
  uint64_t off = l.data_offset(0, 100);
  EXPECT_EQ(off % 64, 0u);
  uint64_t guard = l.regions[0].begin + l.regions[0].capacity;
  EXPECT_LE(off + 100, guard);
  EXPECT_LT(guard - (off + 100), 64u);
  EXPECT_EQ(l.data_offset(1, 4096) + 4096, l.regions[1].begin + l.regions[1].capacity);
  // A smaller shape of the same slot slides towards the end.
  EXPECT_EQ(l.data_offset(1, 64) + 64, l.regions[1].begin + l.regions[1].capacity);
  EXPECT_THROW(l.data_offset(0, 5000), std::out_of_range);
}

TEST(ArenaLayout, RejectsBadGeometry) {
  EXPECT_THROW(plan_arena({1}, 4000, 64), std::invalid_argument);
  EXPECT_THROW(plan_arena({1}, 4096, 48), std::invalid_argument);
  EXPECT_THROW(plan_arena({1}, 4096, 8192), std::invalid_argument);
}

}  // namespace
}  // namespace kforge::exec
