// Typed reading of candidate-controlled JSON (judge/json_fields.h) and the
// reply rules built on it (judge::reply_problem): a wrong type is a sentence
// naming the field, never an exception.
#include "judge/json_fields.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "judge/runner_process.h"

namespace kforge::judge {
namespace {

TEST(JsonFields, NamesTheFieldAndBothTypes) {
  json body = {{"type", 7}};
  EXPECT_EQ(check_fields(body, {{"type", FieldKind::kString, true}}), "field 'type' is an integer, expected a string");
  EXPECT_EQ(check_fields(json::object(), {{"type", FieldKind::kString, true}}), "field 'type' is missing");
  EXPECT_EQ(check_fields(json::array(), {{"type", FieldKind::kString}}, "profile"),
            "profile: is an array, expected a map");
  EXPECT_EQ(check_fields({{"x", -1}}, {{"x", FieldKind::kUnsigned}}),
            "field 'x' is a negative integer, expected a non-negative integer");
  EXPECT_EQ(check_fields({{"x", 1.5}}, {{"x", FieldKind::kInteger}}),
            "field 'x' is a floating-point number, expected an integer");
  EXPECT_EQ(check_fields({{"x", 1}, {"y", "s"}, {"z", json::object()}},
                         {{"x", FieldKind::kUnsigned, true}, {"y", FieldKind::kString}, {"z", FieldKind::kObject}}),
            "");
}

TEST(JsonFields, UnsignedAboveInt64IsNotAnInteger) {
  json big = std::numeric_limits<uint64_t>::max();
  EXPECT_FALSE(has_kind(big, FieldKind::kInteger));
  EXPECT_TRUE(has_kind(big, FieldKind::kUnsigned));
  EXPECT_EQ(integer_or({{"x", big}}, "x", -3), -3);
}

TEST(JsonFields, TypedReadsFallBackInsteadOfThrowing) {
  json body = {{"rc", "0"}, {"n", 5}, {"s", 3}, {"b", 1}};
  EXPECT_EQ(integer_or(body, "rc", -1), -1);
  EXPECT_EQ(integer_or(body, "n", -1), 5);
  EXPECT_EQ(unsigned_or(body, "n", 0), 5u);
  EXPECT_EQ(string_or(body, "s", "none"), "none");
  EXPECT_EQ(boolean_or(body, "b", false), false);
  EXPECT_EQ(number_or(body, "n", 0.0), 5.0);
  EXPECT_EQ(integer_or(json(7), "n", -1), -1);  // not even a map
  EXPECT_EQ(string_or(json::array(), "s", "x"), "x");
}

TEST(JsonFields, MakesTextValidUtf8) {
  EXPECT_EQ(to_valid_utf8("plain"), "plain");
  EXPECT_EQ(to_valid_utf8("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(to_valid_utf8("a\xff"
                          "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(to_valid_utf8("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");                  // overlong '/'
  EXPECT_EQ(to_valid_utf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // a surrogate
  EXPECT_EQ(to_valid_utf8("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd");                  // truncated
  json j = {{"message", "bad \xfe"}, {"list", {"\xff"}}};
  j["k\x80"] = 1;
  make_valid_utf8(&j);
  EXPECT_NO_THROW(j.dump());
  EXPECT_EQ(j["message"], "bad \xef\xbf\xbd");
  EXPECT_TRUE(j.contains("k\xef\xbf\xbd"));
}

TEST(ReplyRules, DoneNeedsAnIntRcAndANonNegativeTime) {
  EXPECT_EQ(reply_problem("done", {{"rc", 0}, {"self_ns", 10}}), "");
  EXPECT_EQ(reply_problem("done", {{"rc", "0"}, {"self_ns", 10}}), "field 'rc' is a string, expected an integer");
  EXPECT_EQ(reply_problem("done", {{"rc", 0}}), "field 'self_ns' is missing");
  EXPECT_EQ(reply_problem("done", {{"rc", 0}, {"self_ns", -5}}),
            "field 'self_ns' is a negative integer, expected a non-negative integer");
  EXPECT_EQ(reply_problem("done", {{"rc", int64_t{1} << 40}, {"self_ns", 1}}),
            "field 'rc' is 1099511627776, not an int");
  EXPECT_EQ(reply_problem("done", {{"rc", 0}, {"self_ns", 1}, {"graph", "yes"}}),
            "field 'graph' is a string, expected a map");
  EXPECT_EQ(reply_problem("done", {{"rc", 0}, {"self_ns", 1}, {"graph", {{"used", 1}}}}),
            "graph: field 'used' is an integer, expected a boolean");
  EXPECT_EQ(reply_problem("done", {{"rc", 0}, {"self_ns", 1}, {"device_ns", 3}, {"launch_gate", "on"}}), "");
}

TEST(ReplyRules, OtherReplies) {
  EXPECT_EQ(reply_problem("error", {{"stage", "load"}, {"message", "x"}}), "");
  EXPECT_EQ(reply_problem("error", {{"stage", 1}, {"message", "x"}}), "field 'stage' is an integer, expected a string");
  EXPECT_EQ(reply_problem("ready", {{"sandbox", json::array()}}), "field 'sandbox' is an array, expected a map");
  EXPECT_EQ(reply_problem("profiled", json::object()), "field 'profile' is missing");
  EXPECT_EQ(reply_problem("sandbox", {{"syscall", "open"}}), "field 'syscall' is a string, expected an integer");
  EXPECT_EQ(reply_problem("bound", json::object()), "");
}

}  // namespace
}  // namespace kforge::judge
