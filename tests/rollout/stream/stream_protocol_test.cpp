// The trajectory stream's wire codec, byte by byte, without sockets.
#include "kforge/rollout/stream/stream_protocol.h"

#include <gtest/gtest.h>

#include <random>

#include "kforge/core/msgpack.h"

namespace kforge::rollout::stream {
namespace {

using json = nlohmann::json;

std::string pack(const json& j) { return msgpack::encode(j); }

std::string trajectory_bytes(const std::string& id = "t-1") {
  return pack({{"schema_version", 1}, {"id", id}, {"turns", json::array()}, {"task_id", "x"}});
}

DecodeError decode_error(const std::string& bytes) {
  try {
    decode(bytes);
  } catch (const DecodeError& e) {
    return e;
  }
  ADD_FAILURE() << "decoded without error";
  return DecodeError("");
}

TEST(StreamProtocolTest, EveryMessageRoundTrips) {
  Hello h;
  h.worker = "node3.gpu-1";
  h.instance = "0123abcd";
  h.heartbeat_ms = 250;
  h.next_seq = 17;
  h.unacked = 4;
  h.software = "kforge 0.1.0";
  auto hd = std::get<Hello>(decode(encode(h)));
  EXPECT_EQ(hd.versions, supported_versions());
  EXPECT_EQ(hd.worker, "node3.gpu-1");
  EXPECT_EQ(hd.instance, "0123abcd");
  EXPECT_EQ(hd.heartbeat_ms, 250u);
  EXPECT_EQ(hd.next_seq, 17u);
  EXPECT_EQ(hd.unacked, 4u);
  EXPECT_EQ(hd.software, "kforge 0.1.0");

  const std::string data = trajectory_bytes("traj-9");
  auto td = std::get<Traj>(decode(encode_traj(uint64_t{1} << 40, "traj-9", data)));
  EXPECT_EQ(td.seq, uint64_t{1} << 40);
  EXPECT_EQ(td.id, "traj-9");
  EXPECT_EQ(td.data, data);
  EXPECT_EQ(encode(Traj{5, "traj-9", data}), encode_traj(5, "traj-9", data));

  EXPECT_TRUE(std::holds_alternative<Heartbeat>(decode(encode(Heartbeat{}))));
  EXPECT_TRUE(std::holds_alternative<Bye>(decode(encode(Bye{}))));

  Welcome w;
  w.receiver = "r1";
  w.credit = 300;
  w.heartbeat_ms = 500;
  w.max_message_bytes = 1 << 20;
  w.acked_through = 99;
  auto wd = std::get<Welcome>(decode(encode(w)));
  EXPECT_EQ(wd.version, 1);
  EXPECT_EQ(wd.credit, 300u);
  EXPECT_EQ(wd.heartbeat_ms, 500u);
  EXPECT_EQ(wd.max_message_bytes, 1u << 20);
  EXPECT_EQ(wd.acked_through, 99u);

  Ack a;
  a.ranges = {{1, 3}, {7, 7}, {100000, 4000000000ull}};
  EXPECT_EQ(std::get<Ack>(decode(encode(a))).ranges, a.ranges);
  EXPECT_EQ(std::get<Credit>(decode(encode(Credit{12}))).credit, 12u);

  Error e;
  e.code = "unsupported_version";
  e.message = "speak 1";
  e.seq = 42;
  e.versions = {1};
  auto ed = std::get<Error>(decode(encode(e)));
  EXPECT_EQ(ed.code, "unsupported_version");
  EXPECT_EQ(ed.message, "speak 1");
  EXPECT_EQ(ed.seq, 42u);
  EXPECT_EQ(ed.versions, std::vector<int>{1});
}

TEST(StreamProtocolTest, TheWireFormatIsPlainMessagePackMaps) {
  // What an independent receiver reads: documented keys, nothing else.
  const json hello = msgpack::decode(encode(Hello{{1}, "w", "i", 1000, 1, 0, ""}));
  EXPECT_EQ(hello, json({{"v", 1},
                         {"type", "hello"},
                         {"versions", {1}},
                         {"worker", "w"},
                         {"instance", "i"},
                         {"heartbeat_ms", 1000},
                         {"next_seq", 1},
                         {"unacked", 0}}));
  const json traj = msgpack::decode(encode_traj(3, "id-3", trajectory_bytes("id-3")));
  EXPECT_EQ(traj["type"], "traj");
  EXPECT_EQ(traj["v"], 1);
  EXPECT_EQ(traj["seq"], 3);
  ASSERT_TRUE(traj["data"].is_binary());
  const auto& bin = traj["data"].get_binary();
  EXPECT_EQ(msgpack::decode(std::string(bin.begin(), bin.end()))["id"], "id-3");
  EXPECT_EQ(msgpack::decode(encode(Ack{{{2, 5}}})), json({{"v", 1}, {"type", "ack"}, {"ranges", {{2, 5}}}}));
}

TEST(StreamProtocolTest, TrajsInAnyKeyOrderOrWithExtraKeysDecodeTheSame) {
  // The receiver reads trajs in place; other encoders order keys as they
  // like and may add keys (scalars or not).
  const std::string data = trajectory_bytes("k");
  const json bin = json::binary(std::vector<uint8_t>(data.begin(), data.end()));
  const std::vector<json> variants = {
      {{"data", bin}, {"id", "k"}, {"seq", 70000}, {"type", "traj"}, {"v", 1}},
      {{"v", 1}, {"type", "traj"}, {"seq", 70000}, {"id", "k"}, {"data", bin}, {"note", "x"}, {"n", 5}},
      {{"v", 1}, {"type", "traj"}, {"seq", 70000}, {"id", "k"}, {"data", bin}, {"extra", {1, 2}}},
  };
  for (const json& v : variants) {
    const Traj t = std::get<Traj>(decode(pack(v)));
    EXPECT_EQ(t.seq, 70000u);
    EXPECT_EQ(t.id, "k");
    EXPECT_EQ(t.data, data);
  }
  // What the in-place reader refuses, the general decoder names.
  json bad = variants[0];
  bad["seq"] = "7";
  EXPECT_EQ(decode_error(pack(bad)).field(), "seq");
  bad = variants[0];
  bad["v"] = 9;
  EXPECT_EQ(decode_error(pack(bad)).field(), "v");
}

TEST(StreamProtocolTest, UnknownKeysAreIgnoredForForwardCompatibility) {
  const json j = {{"v", 1}, {"type", "credit"}, {"credit", 5}, {"added_in_a_later_minor", "x"}};
  EXPECT_EQ(std::get<Credit>(decode(pack(j))).credit, 5u);
}

TEST(StreamProtocolTest, HelloNegotiatesSoAnyVersionIsReadButOthersNeedOurs) {
  // A hello from a newer sender: readable, so the receiver can answer with
  // the versions it speaks.
  const json hello = {{"v", 7}, {"type", "hello"}, {"versions", {7, 6}}, {"worker", "w"}, {"instance", "i"}};
  EXPECT_EQ(std::get<Hello>(decode(pack(hello))).versions, (std::vector<int>{7, 6}));
  const DecodeError e = decode_error(pack({{"v", 2}, {"type", "heartbeat"}}));
  EXPECT_EQ(e.field(), "v");
  EXPECT_NE(std::string(e.what()).find("version 2"), std::string::npos);
}

TEST(StreamProtocolTest, MalformedMessagesNameTheKey) {
  struct Case {
    json message;
    std::string field;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{{"v", 1}}, "type", "missing key \"type\""},
      {{{"v", 1}, {"type", "teleport"}}, "type", "unknown message type"},
      {{{"v", 1}, {"type", "traj"}, {"id", "x"}, {"data", json::binary({0x80})}}, "seq", "missing key \"seq\""},
      {{{"v", 1}, {"type", "traj"}, {"seq", -1}, {"id", "x"}, {"data", json::binary({0x80})}}, "seq", "unsigned"},
      {{{"v", 1}, {"type", "traj"}, {"seq", 0}, {"id", "x"}, {"data", json::binary({0x80})}}, "seq", "at least 1"},
      {{{"v", 1}, {"type", "traj"}, {"seq", 1}, {"id", ""}, {"data", json::binary({0x80})}}, "id", "empty"},
      {{{"v", 1}, {"type", "traj"}, {"seq", 1}, {"id", "x"}, {"data", "not bin"}}, "data", "must be bin"},
      {{{"v", 1}, {"type", "traj"}, {"seq", 1}, {"id", "x"}, {"data", json::binary({0x91, 0x01})}}, "data", "map"},
      {{{"v", 1}, {"type", "traj"}, {"seq", 1}, {"id", "x"}, {"data", json::binary({0x81, 0xa1})}},
       "data",
       "well-formed"},
      {{{"v", 1}, {"type", "hello"}, {"versions", json::array()}, {"worker", "w"}, {"instance", "i"}},
       "versions",
       "1..16"},
      {{{"v", 1}, {"type", "hello"}, {"versions", {1}}, {"worker", "has space"}, {"instance", "i"}},
       "worker",
       "letters"},
      {{{"v", 1}, {"type", "hello"}, {"versions", {1}}, {"worker", std::string(200, 'w')}, {"instance", "i"}},
       "worker",
       "longer than 128"},
      {{{"v", 1}, {"type", "hello"}, {"versions", {1}}, {"worker", "w"}, {"instance", "a/b"}}, "instance", ""},
      {{{"v", 1}, {"type", "ack"}, {"ranges", {{5, 2}}}}, "ranges", "first <= last"},
      {{{"v", 1}, {"type", "ack"}, {"ranges", {{0, 2}}}}, "ranges", "first <= last"},
      {{{"v", 1}, {"type", "ack"}, {"ranges", {{1}}}}, "ranges", "[first, last]"},
      {{{"v", 1}, {"type", "credit"}}, "credit", "missing"},
  };
  for (const auto& c : cases) {
    const DecodeError e = decode_error(pack(c.message));
    EXPECT_EQ(e.field(), c.field) << c.message.dump();
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what() << " for " << c.message.dump();
  }
  EXPECT_NE(std::string(decode_error("\xc1").what()).find("MessagePack"), std::string::npos);
  EXPECT_NE(std::string(decode_error(pack({1, 2})).what()).find("map"), std::string::npos);
  EXPECT_NE(
      std::string(decode_error(pack({{"v", 1}, {"type", "credit"}, {"credit", 1}}) + "x").what()).find("MessagePack"),
      std::string::npos);
}

TEST(StreamProtocolTest, ATrajWithAReadableSeqCarriesItInTheError) {
  // So that a receiver can answer `rejected` with the seq and the sender sets
  // that one record aside instead of resending it forever.
  const json bad = {{"v", 1}, {"type", "traj"}, {"seq", 77}, {"id", "x"}, {"data", json::binary({0x92})}};
  EXPECT_EQ(decode_error(pack(bad)).traj_seq, 77u);
  const json no_seq = {{"v", 1}, {"type", "traj"}, {"id", "x"}, {"data", json::binary({0x92})}};
  EXPECT_FALSE(decode_error(pack(no_seq)).traj_seq.has_value());
}

TEST(StreamProtocolTest, DataNestedPastTheLimitIsRefusedWithoutRecursion) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "\x81\xa1k";
  deep += "\x01";
  const json bad = {{"v", 1},
                    {"type", "traj"},
                    {"seq", 1},
                    {"id", "x"},
                    {"data", json::binary(std::vector<uint8_t>(deep.begin(), deep.end()))}};
  const DecodeError e = decode_error(pack(bad));
  EXPECT_EQ(e.field(), "data");
  EXPECT_NE(std::string(e.what()).find("deeper"), std::string::npos) << e.what();
}

TEST(StreamProtocolTest, ErrorMessagesAreCutAtACharacterBoundary) {
  Error e;
  e.code = "bad_message";
  e.message = std::string(kMaxErrorMessageBytes - 1, 'a') + "\xc3\xa9tail";  // 'é' straddles the cut
  const Error d = std::get<Error>(decode(encode(e)));
  EXPECT_EQ(d.message, std::string(kMaxErrorMessageBytes - 1, 'a'));
  EXPECT_TRUE(msgpack::valid_utf8(d.message));
}

TEST(StreamProtocolTest, RangesMergeAdjacentAndDuplicateSeqs) {
  using R = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ(to_ranges({5, 1, 2, 3, 3, 9, 10, 7}), (R{{1, 3}, {5, 5}, {7, 7}, {9, 10}}));
  EXPECT_EQ(to_ranges({}), R{});
}

TEST(StreamProtocolTest, ErrorCodeNamesAreStable) {
  EXPECT_EQ(error_code_names(),
            (std::vector<std::string>{"bad_message", "unsupported_version", "no_session", "worker_conflict", "rejected",
                                      "credit_exceeded", "too_many_workers", "shutting_down"}));
  EXPECT_EQ(error_code_from_name("rejected"), ErrorCode::kRejected);
  EXPECT_FALSE(error_code_from_name("nope").has_value());
}

// Random bytes and random corruptions of valid messages: the decoder returns
// a message or throws DecodeError; nothing else, and no crash.
TEST(StreamProtocolTest, FuzzedInputOnlyEverYieldsMessagesOrDecodeErrors) {
  std::mt19937 rng(20261203);
  const std::vector<std::string> valid = {
      encode(Hello{{1}, "worker-1", "abc", 1000, 5, 2, "kforge"}),
      encode_traj(9, "traj-9", trajectory_bytes("traj-9")),
      encode(Ack{{{1, 4}, {8, 8}}}),
      encode(Welcome{1, "r", 64, 1000, 1 << 20, 3}),
      encode(Error{"rejected", "no", 4, {1}}),
      encode(Credit{3}),
      encode(Heartbeat{}),
  };
  int decoded = 0;
  for (int i = 0; i < 30000; ++i) {
    std::string bytes = valid[static_cast<size_t>(i) % valid.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 4) {
        case 0:
          bytes[at] = static_cast<char>(rng());
          break;
        case 1:
          bytes.erase(at, 1 + rng() % 4);
          break;
        case 2:
          bytes.insert(at, 1, static_cast<char>(rng()));
          break;
        default:
          bytes.resize(at);
          break;
      }
    }
    if (i % 7 == 0) {
      bytes.resize(rng() % 64);
      for (char& c : bytes) c = static_cast<char>(rng());
    }
    try {
      const Message m = decode(bytes);
      ++decoded;
      // Whatever decodes re-encodes and decodes to the same type.
      EXPECT_EQ(decode(encode(m)).index(), m.index());
    } catch (const DecodeError&) {
    }
  }
  EXPECT_GT(decoded, 100);  // the corruptions leave some messages valid
}

TEST(StreamProtocolTest, IdentifierRules) {
  EXPECT_EQ(check_worker_id("gpu0.node-12:rank@3+x_y"), "");
  EXPECT_NE(check_worker_id(""), "");
  EXPECT_NE(check_worker_id("a/b"), "");
  EXPECT_NE(check_worker_id(std::string(129, 'a')), "");
  EXPECT_EQ(check_instance("0123456789abcdef"), "");
  EXPECT_NE(check_instance("a:b"), "");
}

}  // namespace
}  // namespace kforge::rollout::stream
