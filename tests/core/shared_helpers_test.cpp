// The helpers every part of the tree shares from core (splitmix64.h,
// errno_text.h, trim.h): their values are what seeds, error messages and
// parsed diagnostics were before there was one copy of each.
#include <errno.h>
#include <gtest/gtest.h>

#include "kforge/core/errno_text.h"
#include "kforge/core/splitmix64.h"
#include "kforge/core/trim.h"

namespace kforge {
namespace {

TEST(SplitMix64, GivesThePublishedSequence) {
  // The first outputs of the SplitMix64 generator from state 0 (Vigna's
  // reference implementation): state += golden gamma, then the mixer.
  uint64_t state = 0;
  auto next = [&] {
    const uint64_t out = splitmix64(state);
    state += 0x9e3779b97f4a7c15ULL;
    return out;
  };
  EXPECT_EQ(next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(next(), 0x06c45d188009454fULL);
}

TEST(SplitMix64, SpreadsNearbySeeds) {
  EXPECT_NE(splitmix64(1), splitmix64(2));
  EXPECT_EQ(splitmix64(1), 0x910a2dec89025cc1ULL);
  static_assert(splitmix64(42) == splitmix64(42));
}

TEST(ErrnoText, DescribesTheGivenValue) {
  EXPECT_EQ(errno_text(ENOENT), "No such file or directory");
  EXPECT_EQ(errno_text(EACCES), "Permission denied");
}

TEST(ErrnoText, WithoutAnArgumentReadsErrnoAtTheCall) {
  errno = ENOENT;
  EXPECT_EQ(errno_text(), "No such file or directory");
  errno = 0;
}

TEST(Trim, DropsSpacesTabsAndLineEndsAtBothEnds) {
  EXPECT_EQ(trim("  a b\t\r\n"), "a b");
  EXPECT_EQ(trim("\n\t "), "");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim("x"), "x");
}

TEST(Trim, KeepsWhatTheGivenSetDoesNotName) {
  // The compiler-diagnostics parser trims blanks only.
  EXPECT_EQ(trim(" msg\r ", " \t"), "msg\r");
  EXPECT_EQ(trim("--a--", "-"), "a");
}

}  // namespace
}  // namespace kforge
