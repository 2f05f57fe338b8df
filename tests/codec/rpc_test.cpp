// The request/reply envelope: round trips, and every kind of malformed input
// turned into a ProtocolError with the right code, field and (when readable)
// request id.
#include "kforge/core/rpc.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace kforge::rpc {
namespace {

std::string msgpack(const json& value) {
  std::string out;
  json::to_msgpack(value, out);
  return out;
}

struct Failure {
  std::string code;
  std::string field;
  std::string message;
  json id;
};

Failure decode_failure(const std::string& payload) {
  Failure f;
  try {
    decode_request(payload, &f.id);
  } catch (const ProtocolError& e) {
    f.code = error_code_name(e.code());
    f.field = e.field();
    f.message = e.what();
    return f;
  }
  ADD_FAILURE() << "the payload was accepted";
  return f;
}

TEST(ProtocolTest, RequestRoundTrip) {
  const json params = {{"env_id", 3}, {"tool_call", {{"name", "compile"}, {"arguments", "{\"source\": \"x\"}"}}}};
  const std::string bytes = encode_request(42, "step", params);
  json id;
  const Request r = decode_request(bytes, &id);
  EXPECT_EQ(r.id, 42u);
  EXPECT_EQ(id, json(42));
  EXPECT_EQ(r.method, "step");
  EXPECT_EQ(r.params, params);
}

TEST(ProtocolTest, ParamsMayBeOmittedOrNil) {
  json id;
  EXPECT_EQ(decode_request(msgpack({{"v", 1}, {"id", 1}, {"method", "hello"}}), &id).params, json::object());
  EXPECT_EQ(decode_request(msgpack({{"v", 1}, {"id", 1}, {"method", "hello"}, {"params", nullptr}}), &id).params,
            json::object());
}

TEST(ProtocolTest, ResultAndErrorRoundTrip) {
  const json result = {{"observation", {{"text", "hi"}, {"data", {{"k", 1.5}}}}}, {"reward", -1.0}};
  Reply ok = decode_reply(encode_result(7, result));
  EXPECT_TRUE(ok.ok);
  EXPECT_EQ(ok.id, json(7));
  EXPECT_EQ(ok.result, result);

  Reply err = decode_reply(encode_error(8, ErrorCode::kUnknownEnv, "env 3 is not held", "/params/env_id"));
  EXPECT_FALSE(err.ok);
  EXPECT_EQ(err.id, json(8));
  EXPECT_EQ(err.code, "unknown_env");
  EXPECT_EQ(err.message, "env 3 is not held");
  EXPECT_EQ(err.field, "/params/env_id");

  Reply unroutable = decode_reply(encode_error(nullptr, ErrorCode::kBadRequest, "garbage"));
  EXPECT_TRUE(unroutable.id.is_null());
  EXPECT_EQ(unroutable.field, "");
}

TEST(ProtocolTest, ErrorCodeNamesAreStable) {
  // Clients match on these strings; PROTOCOL.md lists them.
  const std::vector<std::string> expected = {
      "bad_request",    "unsupported_version", "unknown_method", "invalid_task", "unknown_task",
      "invalid_action", "unknown_env",         "env_busy",       "no_episode",   "episode_finished",
      "pool_full",      "too_many_requests",   "shutting_down",  "internal"};
  EXPECT_EQ(error_code_names(), expected);
  EXPECT_EQ(error_code_name(ErrorCode::kInvalidTask), "invalid_task");
}

TEST(ProtocolTest, NonMsgpackBytesAreBadRequestsWithoutId) {
  for (const std::string& bytes :
       {std::string(), std::string("hello world"), std::string("\xc1", 1), std::string("\x92\x01", 2),
        std::string("\xdc\xff\xff", 3), std::string("\x81\xa2id\x01\x01", 6)}) {
    const Failure f = decode_failure(bytes);
    EXPECT_EQ(f.code, "bad_request") << bytes.size();
    EXPECT_TRUE(f.id.is_null());
  }
}

TEST(ProtocolTest, CheckMsgpackFindsTruncationTrailingBytesAndLies) {
  EXPECT_EQ(msgpack::check(msgpack({{"a", {1, 2, 3}}, {"b", "text"}})), "");
  EXPECT_NE(msgpack::check(std::string("\x92\xcd\x01", 3)).find("truncated"), std::string::npos);
  EXPECT_NE(msgpack::check(std::string("\x01\x02", 2)).find("trailing"), std::string::npos);
  // A 32-bit array header claiming 4 billion items in a 5-byte message.
  EXPECT_NE(msgpack::check(std::string("\xdd\xff\xff\xff\xff", 5)).find("claims more items"), std::string::npos);
  EXPECT_NE(msgpack::check(std::string("\xdb\x00\x00\x00\x10"
                                       "abc",
                                       8))
                .find("truncated"),
            std::string::npos);
}

TEST(ProtocolTest, DeepNestingIsRefusedBeforeDecoding) {
  // One million nested one-element arrays: decoding them recursively would
  // overflow the stack.
  std::string bomb(1000000, '\x91');
  bomb += '\x01';
  EXPECT_NE(msgpack::check(bomb).find("nested deeper"), std::string::npos);
  EXPECT_EQ(decode_failure(bomb).code, "bad_request");
  std::string ok(msgpack::kMaxDepth - 1, '\x91');
  ok += '\x01';
  EXPECT_EQ(msgpack::check(ok), "");
}

TEST(ProtocolTest, RepeatedKeysInAMapAreABadRequest) {
  // {"v": 1, "id": 5, "method": "ping", "method": "close"}: MessagePack can
  // say it; nlohmann would keep the last copy silently.
  std::string bytes = "\x84";
  bytes += "\xa1v\x01\xa2id\x05";
  bytes += "\xa6method\xa4ping";
  bytes +=
      "\xa6method\xa5"
      "close";
  const Failure f = decode_failure(bytes);
  EXPECT_EQ(f.code, "bad_request");
  EXPECT_NE(f.message.find("a map repeats the key \"method\""), std::string::npos) << f.message;
  // Nested maps too.
  std::string nested = "\x84\xa1v\x01\xa2id\x05\xa6method\xa4ping\xa6params\x82";
  nested += std::string(
                "\xa6"
                "env_id\x00",
                8) +
            "\xa6"
            "env_id\x01";
  EXPECT_NE(decode_failure(nested).message.find("repeats the key \"env_id\""), std::string::npos);
}

TEST(ProtocolTest, NonMapMessages) {
  EXPECT_EQ(decode_failure(msgpack(json::array({1, 2}))).code, "bad_request");
  EXPECT_EQ(decode_failure(msgpack("hello")).code, "bad_request");
  EXPECT_EQ(decode_failure(msgpack(nullptr)).code, "bad_request");
}

TEST(ProtocolTest, TheIdIsReadFirstSoLaterErrorsAreRoutable) {
  Failure missing = decode_failure(msgpack({{"v", 1}, {"method", "hello"}}));
  EXPECT_EQ(missing.field, "/id");
  EXPECT_TRUE(missing.id.is_null());

  for (const json& bad : {json(-1), json("7"), json(1.5), json::array()}) {
    Failure f = decode_failure(msgpack({{"v", 1}, {"id", bad}, {"method", "hello"}}));
    EXPECT_EQ(f.code, "bad_request");
    EXPECT_EQ(f.field, "/id");
    EXPECT_TRUE(f.id.is_null());
  }

  Failure no_method = decode_failure(msgpack({{"v", 1}, {"id", 5}}));
  EXPECT_EQ(no_method.id, json(5));
  EXPECT_EQ(no_method.field, "/method");
}

TEST(ProtocolTest, VersionIsChecked) {
  Failure missing = decode_failure(msgpack({{"id", 1}, {"method", "hello"}}));
  EXPECT_EQ(missing.code, "bad_request");
  EXPECT_EQ(missing.field, "/v");
  Failure wrong = decode_failure(msgpack({{"v", 2}, {"id", 1}, {"method", "hello"}}));
  EXPECT_EQ(wrong.code, "unsupported_version");
  EXPECT_EQ(wrong.field, "/v");
  EXPECT_EQ(wrong.id, json(1));
  EXPECT_EQ(decode_failure(msgpack({{"v", "1"}, {"id", 1}, {"method", "hello"}})).code, "bad_request");
}

TEST(ProtocolTest, WrongTypesAndUnknownKeysNameTheField) {
  Failure method = decode_failure(msgpack({{"v", 1}, {"id", 1}, {"method", 3}}));
  EXPECT_EQ(method.field, "/method");
  Failure params = decode_failure(msgpack({{"v", 1}, {"id", 1}, {"method", "make"}, {"params", {1, 2}}}));
  EXPECT_EQ(params.field, "/params");
  Failure unknown = decode_failure(msgpack({{"v", 1}, {"id", 1}, {"method", "make"}, {"parms", json::object()}}));
  EXPECT_EQ(unknown.code, "bad_request");
  EXPECT_EQ(unknown.field, "/parms");
  EXPECT_NE(unknown.message.find("did you mean \"params\""), std::string::npos) << unknown.message;
}

TEST(ProtocolTest, LongNamesAreRefusedWithoutBeingQuotedBack) {
  // A megabyte method name or key: the error says so in a short message
  // (the flood bench sends these as fast as the server answers).
  Failure method = decode_failure(msgpack({{"v", 1}, {"id", 1}, {"method", std::string(1 << 20, 'm')}}));
  EXPECT_EQ(method.code, "unknown_method");
  EXPECT_EQ(method.field, "/method");
  EXPECT_NE(method.message.find("at most 64 characters, got 1048576"), std::string::npos) << method.message;
  json id;
  EXPECT_EQ(decode_request(msgpack({{"v", 1}, {"id", 1}, {"method", std::string(64, 'm')}}), &id).method.size(), 64u);
  Failure key =
      decode_failure(msgpack({{"v", 1}, {"id", 1}, {"method", "make"}, {std::string(1 << 20, 'k'), json::object()}}));
  EXPECT_EQ(key.code, "bad_request");
  EXPECT_LT(key.message.size(), 200u) << key.message.substr(0, 200);
  EXPECT_LT(key.field.size(), 70u);
}

TEST(ProtocolTest, StringsMustBeUtf8) {
  // Built by hand: nlohmann would refuse to encode the invalid string.
  std::string bytes = msgpack({{"v", 1}, {"id", 4}, {"method", "step"}, {"params", {{"tool_call", "ab"}}}});
  const size_t at = bytes.find("ab");
  bytes[at] = '\xff';
  Failure f = decode_failure(bytes);
  EXPECT_EQ(f.code, "bad_request");
  EXPECT_EQ(f.field, "/params/tool_call");
  EXPECT_EQ(f.id, json(4));
  json id;
  EXPECT_EQ(decode_request(
                msgpack({{"v", 1}, {"id", 1}, {"method", "hello"}, {"params", {{"client", "caf\u00e9 \u6771"}}}}), &id)
                .params["client"],
            "caf\u00e9 \u6771");
}

TEST(ProtocolTest, InputErrorsOfSubDocumentsBecomeFields) {
  ProtocolError shape = from_input_error(
      InputError("task: field /inputs/0/shape/1: expected a positive integer (shape dimension), got number -1"),
      ErrorCode::kInvalidTask, "task", "/params/task");
  EXPECT_EQ(shape.code(), ErrorCode::kInvalidTask);
  EXPECT_EQ(shape.field(), "/params/task/inputs/0/shape/1");
  EXPECT_EQ(std::string(shape.what()),
            "field /params/task/inputs/0/shape/1: expected a positive integer (shape dimension), got number -1");

  ProtocolError unknown = from_input_error(
      InputError("task: field /inputs/0: unknown key \"shap\" (did you mean \"shape\"?); allowed keys: dtype, shape"),
      ErrorCode::kInvalidTask, "task", "/params/task");
  EXPECT_EQ(unknown.field(), "/params/task/inputs/0/shap");

  ProtocolError root = from_input_error(InputError("task: field /: missing required key \"nodes\""),
                                        ErrorCode::kInvalidTask, "task", "/params/task");
  EXPECT_EQ(root.field(), "/params/task");

  ProtocolError other = from_input_error(InputError("node 2 (matmul): shapes [3, 4] and [5, 6] do not match"),
                                         ErrorCode::kInvalidTask, "task", "/params/task");
  EXPECT_EQ(other.field(), "/params/task");
  EXPECT_EQ(std::string(other.what()), "node 2 (matmul): shapes [3, 4] and [5, 6] do not match");
}

// Random bytes and random corruptions of valid requests: the decoder either
// accepts a request or throws ProtocolError; nothing else, and no crash.
TEST(ProtocolTest, FuzzedInputOnlyEverYieldsRequestsOrProtocolErrors) {
  std::mt19937 rng(1234);
  const std::vector<std::string> valid = {
      encode_request(1, "hello", json::object()),
      encode_request(2, "reset", {{"env_id", 0}, {"task", {{"id", "t"}, {"inputs", {{{"name", "x"}}}}}}, {"seed", 9}}),
      encode_request(3, "step", {{"env_id", 1}, {"tool_call", {{"name", "verify"}, {"arguments", "{}"}}}}),
  };
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
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
    if (i % 7 == 0) {  // pure noise as well
      bytes.resize(rng() % 64);
      for (char& c : bytes) c = static_cast<char>(rng());
    }
    json id;
    try {
      decode_request(bytes, &id);
      ++accepted;
    } catch (const ProtocolError&) {
    }
  }
  // Some corruptions only change values, which is still a request.
  EXPECT_GT(accepted, 0);
}

TEST(ProtocolTest, MalformedRepliesAreRejected) {
  EXPECT_THROW(decode_reply("junk"), ProtocolError);
  EXPECT_THROW(decode_reply(msgpack({{"v", 1}, {"id", 1}})), ProtocolError);
  EXPECT_THROW(decode_reply(msgpack({{"v", 9}, {"id", 1}, {"ok", true}})), ProtocolError);
}

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out += static_cast<char>(v);
  return out;
}

TEST(ProtocolTest, RequestIdsArePeekedAtWithoutDecoding) {
  EXPECT_EQ(peek_request_id(encode_request(42, "ping", json::object())), 42u);
  EXPECT_EQ(peek_request_id(encode_request(UINT64_MAX, "step", {{"env_id", 1}})), UINT64_MAX);
  // The Python client's order: "v" first; "id" after short scalars.
  EXPECT_EQ(
      peek_request_id(bytes({0x84, 0xa1, 'v',  0x01, 0xa2, 'i', 'd', 0xcd, 0x01, 0x00, 0xa6, 'm', 'e', 't', 'h',
                             'o',  'd',  0xa4, 'p',  'i',  'n', 'g', 0xa6, 'p',  'a',  'r',  'a', 'm', 's', 0x80})),
      256u);
  // A non-negative signed integer is an id for decode_request too.
  EXPECT_EQ(peek_request_id(bytes({0x81, 0xa2, 'i', 'd', 0xd0, 0x05})), 5u);
  EXPECT_EQ(peek_request_id(bytes({0x81, 0xa2, 'i', 'd', 0xd0, 0xfb})), std::nullopt);  // -5
  EXPECT_EQ(peek_request_id(bytes({0x81, 0xa2, 'i', 'd', 0xff})), std::nullopt);        // -1
  EXPECT_EQ(peek_request_id(bytes({0x81, 0xa2, 'i', 'd', 0xa1, 'x'})), std::nullopt);   // a string
  // Not read past a container, nor past the 4th entry, nor truncated input.
  EXPECT_EQ(peek_request_id(bytes({0x82, 0xa1, 'p', 0x90, 0xa2, 'i', 'd', 0x01})), std::nullopt);
  EXPECT_EQ(peek_request_id(bytes(
                {0x85, 0xa1, 'a', 0x01, 0xa1, 'b', 0x01, 0xa1, 'c', 0x01, 0xa1, 'e', 0x01, 0xa2, 'i', 'd', 0x01})),
            std::nullopt);
  EXPECT_EQ(peek_request_id(bytes({0x81, 0xa2, 'i', 'd', 0xcf, 0x01})), std::nullopt);
  EXPECT_EQ(peek_request_id(bytes({0x81, 0xa2, 'i'})), std::nullopt);
  EXPECT_EQ(peek_request_id(""), std::nullopt);
  EXPECT_EQ(peek_request_id(bytes({0x93, 0x01, 0x02, 0x03})), std::nullopt);
  // What it finds is what decode_request finds.
  const std::string python_style =
      bytes({0x84, 0xa1, 'v', 0x01, 0xa2, 'i', 'd',  0x07, 0xa6, 'm', 'e', 't', 'h', 'o',
             'd',  0xa4, 'p', 'i',  'n',  'g', 0xa6, 'p',  'a',  'r', 'a', 'm', 's', 0x80});
  json id;
  EXPECT_EQ(decode_request(python_style, &id).id, 7u);
  EXPECT_EQ(peek_request_id(python_style), 7u);
}

// Found by fuzz_policy_wire in CI: an error reply whose message is a number
// threw json::type_error out of the decoder.
TEST(ProtocolTest, ErrorReplyFieldsOfTheWrongTypeAreNamed) {
  for (const char* key : {"code", "message", "field"}) {
    json error = {{"code", "bad_request"}, {"message", "m"}};
    error[key] = 39;
    try {
      decode_reply(msgpack({{"v", 1}, {"id", nullptr}, {"ok", false}, {"error", error}}));
      ADD_FAILURE() << key << " of type number was accepted";
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.field(), std::string("/error/") + key);
      EXPECT_NE(std::string(e.what()).find("must be a string"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kforge::rpc
