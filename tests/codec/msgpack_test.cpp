// msgpack::decode builds the DOM itself (core/src/codec/msgpack.cpp): it must
// give exactly what nlohmann's reader gives for every type of the format, and
// refuse what that reader refuses.
#include "kforge/core/msgpack.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>

namespace kforge {
namespace {

using json = nlohmann::json;

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

void expect_same_as_nlohmann(const std::string& payload) {
  const json ours = msgpack::decode(payload);
  const json theirs = json::from_msgpack(payload);
  EXPECT_EQ(ours, theirs) << ours.dump() << " vs " << theirs.dump();
  EXPECT_EQ(ours.type(), theirs.type());
}

TEST(MsgpackDecodeTest, EveryScalarTypeAgreesWithNlohmann) {
  // Integers at each width and sign, as nlohmann's encoder writes them.
  for (int64_t v : {int64_t{0}, int64_t{1}, int64_t{127}, int64_t{128}, int64_t{255}, int64_t{256}, int64_t{65535},
                    int64_t{65536}, int64_t{4294967295}, int64_t{4294967296}, int64_t{-1}, int64_t{-32}, int64_t{-33},
                    int64_t{-128}, int64_t{-129}, int64_t{-32768}, int64_t{-32769}, INT64_MIN, INT64_MAX}) {
    expect_same_as_nlohmann(msgpack::encode(json(v)));
  }
  expect_same_as_nlohmann(msgpack::encode(json(UINT64_MAX)));
  for (double d : {0.0, -1.5, 3.141592653589793, 1e300, -1e-300}) expect_same_as_nlohmann(msgpack::encode(json(d)));
  expect_same_as_nlohmann(bytes({0xca, 0x3f, 0xc0, 0x00, 0x00}));  // float32 1.5
  expect_same_as_nlohmann(msgpack::encode(json(nullptr)));
  expect_same_as_nlohmann(msgpack::encode(json(true)));
  expect_same_as_nlohmann(msgpack::encode(json(false)));
  // Strings of every header: fixstr, str8, str16, str32.
  for (size_t n : {size_t{0}, size_t{31}, size_t{32}, size_t{255}, size_t{256}, size_t{65535}, size_t{65536}}) {
    expect_same_as_nlohmann(msgpack::encode(json(std::string(n, 'x'))));
  }
  // Binary and ext (with their subtype), fixext 1..16.
  expect_same_as_nlohmann(msgpack::encode(json::binary({1, 2, 3})));
  expect_same_as_nlohmann(msgpack::encode(json::binary(std::vector<uint8_t>(300, 7))));
  expect_same_as_nlohmann(msgpack::encode(json::binary({1, 2, 3}, 5)));
  for (size_t n : {size_t{1}, size_t{2}, size_t{4}, size_t{8}, size_t{16}, size_t{17}}) {
    expect_same_as_nlohmann(msgpack::encode(json::binary(std::vector<uint8_t>(n, 9), 200)));
  }
}

TEST(MsgpackDecodeTest, ContainersOfEverySizeAgreeWithNlohmann) {
  for (size_t n : {size_t{0}, size_t{15}, size_t{16}, size_t{65535}, size_t{65536}}) {
    json a = json::array();
    json m = json::object();
    for (size_t i = 0; i < n; ++i) {
      a.push_back(i % 3 == 0 ? json(i) : i % 3 == 1 ? json("s" + std::to_string(i)) : json::array({i, {{"k", i}}}));
      m["k" + std::to_string(i)] = json::array({i});
    }
    expect_same_as_nlohmann(msgpack::encode(a));
    expect_same_as_nlohmann(msgpack::encode(m));
  }
  expect_same_as_nlohmann(msgpack::encode(json::parse(R"({"v":1,"id":7,"method":"step","params":{"env_id":0,
      "tool_call":{"name":"compile","arguments":"{\"source\": \"int x;\"}"},"nested":[[[],{}],[{"a":[1,{"b":null}]}]]}})")));
}

TEST(MsgpackDecodeTest, RandomDocumentsAgreeWithNlohmann) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 200; ++round) {
    // A random tree of every kind of value, at most 6 levels deep.
    std::function<json(int)> make = [&](int depth) -> json {
      switch (rng() % (depth >= 6 ? 6 : 8)) {
        case 0:
          return static_cast<int64_t>(rng()) >> (rng() % 64);
        case 1:
          return rng() >> (rng() % 64);
        case 2:
          return static_cast<double>(static_cast<int64_t>(rng())) / 1e6;
        case 3:
          return std::string(rng() % 300, static_cast<char>('a' + rng() % 26));
        case 4:
          return rng() % 2 ? json(nullptr) : json(rng() % 2 == 0);
        case 5:
          return json::binary(std::vector<uint8_t>(rng() % 20, 1), static_cast<uint8_t>(rng() % 128));
        case 6: {
          json a = json::array();
          for (uint64_t i = rng() % 20; i > 0; --i) a.push_back(make(depth + 1));
          return a;
        }
        default: {
          json m = json::object();
          for (uint64_t i = rng() % 20; i > 0; --i) m["k" + std::to_string(rng() % 1000)] = make(depth + 1);
          return m;
        }
      }
    };
    expect_same_as_nlohmann(msgpack::encode(make(0)));
  }
}

TEST(MsgpackDecodeTest, RefusesNonStringKeysAndRepeatedKeys) {
  // {1: 2}: a map key that is not a string.
  try {
    msgpack::decode(bytes({0x81, 0x01, 0x02}));
    FAIL() << "a non-string key was accepted";
  } catch (const msgpack::DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("map key at offset 1 is not a string"), std::string::npos) << e.what();
  }
  try {
    msgpack::decode(bytes({0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02}));
    FAIL() << "a repeated key was accepted";
  } catch (const msgpack::DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("repeats the key \"a\""), std::string::npos) << e.what();
  }
  EXPECT_THROW(msgpack::decode(bytes({0xc1})), msgpack::DecodeError);  // the one unused type byte
}

TEST(MsgpackDecodeTest, Utf8CheckAcrossTheAsciiFastPath) {
  EXPECT_TRUE(msgpack::valid_utf8(std::string(1000, 'a') + "\xc3\xa9" + std::string(13, 'b')));
  // An invalid byte at each position of an eight-byte word, after ASCII.
  for (size_t at = 0; at < 17; ++at) {
    std::string s(24, 'a');
    s[at] = '\xff';
    EXPECT_FALSE(msgpack::valid_utf8(s)) << at;
    s[at] = '\xc3';  // a lead byte whose continuation is missing or ASCII
    EXPECT_FALSE(msgpack::valid_utf8(s)) << at;
  }
  EXPECT_FALSE(msgpack::valid_utf8(std::string(8, 'a') + "\xed\xa0\x80"));  // a surrogate
  EXPECT_TRUE(msgpack::valid_utf8(""));
}

}  // namespace
}  // namespace kforge
