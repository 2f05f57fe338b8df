// Arena layout: guard pages around every tensor, tensors end-aligned.
#include "judge/arena_layout.h"

#include <gtest/gtest.h>

namespace kforge::judge {
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

// Canary bands (arena_canary.h): the free bytes on both sides of every
// tensor, up to the band width, merged, never over a tensor.
TEST(CanaryBands, CoverTheFreeBytesAroundEachTensor) {
  ArenaLayout l = plan_arena({100, 8192}, 4096, 64);
  const uint64_t a = l.data_offset(0, 100), b = l.data_offset(1, 4096);  // slot 1 holds a smaller variant
  std::vector<ByteRange> bands = canary_bands(l, {{b, 4096}, {a, 100}}, 1u << 20);
  // Everything that is not a tensor, in two pieces: before a, and between a and b (the
  // padding after a, the guard page, slot 1's slack) plus the guard after b.
  ASSERT_EQ(bands.size(), 3u);
  EXPECT_EQ(bands[0].offset, 0u);
  EXPECT_EQ(bands[0].end(), a);
  EXPECT_EQ(bands[1].offset, a + 100);
  EXPECT_EQ(bands[1].end(), b);
  EXPECT_EQ(bands[2].offset, b + 4096);
  EXPECT_EQ(bands[2].end(), l.size);
}

TEST(CanaryBands, AreLimitedToTheBandWidth) {
  ArenaLayout l = plan_arena({1 << 20, 1 << 20}, 4096, 64);
  const uint64_t a = l.data_offset(0, 64), b = l.data_offset(1, 1 << 20);
  std::vector<ByteRange> bands = canary_bands(l, {{a, 64}, {b, 1 << 20}}, 256);
  // 256 bytes on each side of each tensor: slot 0's slack before a, the guard
  // page after a, the same guard page before b, the last guard after b.
  ASSERT_EQ(bands.size(), 4u);
  EXPECT_EQ(bands[0].offset, a - 256);
  EXPECT_EQ(bands[0].end(), a);
  EXPECT_EQ(bands[1].offset, a + 64);
  EXPECT_EQ(bands[1].end(), a + 64 + 256);
  EXPECT_EQ(bands[2].offset, b - 256);
  EXPECT_EQ(bands[2].end(), b);
  EXPECT_EQ(bands[3].offset, b + (1u << 20));
  EXPECT_EQ(bands[3].end(), b + (1u << 20) + 256);
  for (const ByteRange& band : bands) {
    EXPECT_TRUE(band.end() <= a || band.offset >= a + 64);
    EXPECT_TRUE(band.end() <= b || band.offset >= b + (1u << 20));
  }
}

TEST(CanaryBands, NoTensorsNoBands) { EXPECT_TRUE(canary_bands(plan_arena({64}, 4096, 64), {}).empty()); }

}  // namespace
}  // namespace kforge::judge
