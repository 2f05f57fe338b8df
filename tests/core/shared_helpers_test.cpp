// The helpers every part of the tree shares from core (splitmix64.h,
// fnv1a.h, errno_text.h, trim.h, number_text.h, elapsed.h): their values are
// what seeds, error messages, parsed diagnostics, verdict texts and dataset
// cards were before there was one copy of each.
#include <errno.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "kforge/core/elapsed.h"
#include "kforge/core/errno_text.h"
#include "kforge/core/fnv1a.h"
#include "kforge/core/number_text.h"
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

TEST(Fnv1a, GivesThePublishedValues) {
  EXPECT_EQ(fnv1a(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a("foobar"), 0x85944171f73967e8ULL);
  // Bytes above 0x7f count as unsigned, as the copies it replaced did.
  EXPECT_EQ(fnv1a("\xff"), (0xcbf29ce484222325ULL ^ 0xffULL) * 0x100000001b3ULL);
  EXPECT_NE(fnv1a("x"), fnv1a("y"));
}

TEST(NumberText, SignificantDigitsAsPrintfG) {
  EXPECT_EQ(format_significant(0.000123456), "0.000123");
  EXPECT_EQ(format_significant(1234567.0), "1.23e+06");
  EXPECT_EQ(format_significant(2.0), "2");
  EXPECT_EQ(format_significant(0.25, 2), "0.25");
  EXPECT_EQ(format_significant(0.123456, 2), "0.12");
  EXPECT_EQ(format_significant(1e-5, 2), "1e-05");
  EXPECT_EQ(format_significant(-3.14159, 5), "-3.1416");
  EXPECT_EQ(format_significant(std::nan("")), "nan");
  EXPECT_EQ(format_significant(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(NumberText, FixedDecimalsAsPrintfF) {
  EXPECT_EQ(format_fixed(12.345, 1), "12.3");
  EXPECT_EQ(format_fixed(99.5, 0), "100");
  EXPECT_EQ(format_fixed(0.456, 2), "0.46");
  EXPECT_EQ(format_fixed(3.0, 0), "3");
  // The largest double fits: no truncated figure in a card.
  EXPECT_EQ(format_fixed(std::numeric_limits<double>::max(), 2).size(), 312u);
}

TEST(Elapsed, MillisecondsBetweenTwoPoints) {
  const auto t0 = std::chrono::steady_clock::time_point{};
  EXPECT_DOUBLE_EQ(elapsed_ms(t0, t0 + std::chrono::microseconds(1500)), 1.5);
  EXPECT_DOUBLE_EQ(elapsed_ms(t0 + std::chrono::seconds(2), t0), -2000.0);
  EXPECT_DOUBLE_EQ(elapsed_ms(t0, t0 + std::chrono::nanoseconds(250)), 0.00025);  // no rounding to whole ms
}

TEST(Elapsed, SinceAPointCountsAtLeastTheTimeSlept) {
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(ms_since(start), 20.0);
}

}  // namespace
}  // namespace kforge
