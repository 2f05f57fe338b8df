#include "kforge/rollout/stream/stream_protocol.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "kforge/core/document.h"
#include "kforge/core/msgpack.h"

namespace kforge::rollout::stream {
namespace {

using json = nlohmann::json;

const std::array<std::pair<ErrorCode, const char*>, 8> kCodes = {{
    {ErrorCode::kBadMessage, "bad_message"},
    {ErrorCode::kUnsupportedVersion, "unsupported_version"},
    {ErrorCode::kNoSession, "no_session"},
    {ErrorCode::kWorkerConflict, "worker_conflict"},
    {ErrorCode::kRejected, "rejected"},
    {ErrorCode::kCreditExceeded, "credit_exceeded"},
    {ErrorCode::kTooManyWorkers, "too_many_workers"},
    {ErrorCode::kShuttingDown, "shutting_down"},
}};

// Envelope nesting: a map of scalars, ack ranges two levels deeper.
constexpr int kMaxEnvelopeDepth = 8;

// The few MessagePack forms the encoder needs, written directly so that a
// trajectory's payload is copied once, into the frame.
class Writer {
 public:
  explicit Writer(size_t reserve) { out_.reserve(reserve); }
  void map(size_t n) { header(n, 0x80, 15, 0xde, 0xdf); }
  void array(size_t n) { header(n, 0x90, 15, 0xdc, 0xdd); }
  void str(std::string_view s) {
    if (s.size() <= 31) {
      out_.push_back(static_cast<char>(0xa0 | s.size()));
    } else if (s.size() <= 0xff) {
      out_.push_back(static_cast<char>(0xd9));
      be(s.size(), 1);
    } else {
      header(s.size(), 0, 0, 0xda, 0xdb);
    }
    out_.append(s);
  }
  void bin_header(size_t n) {
    if (n <= 0xff) {
      out_.push_back(static_cast<char>(0xc4));
      be(n, 1);
    } else if (n <= 0xffff) {
      out_.push_back(static_cast<char>(0xc5));
      be(n, 2);
    } else {
      out_.push_back(static_cast<char>(0xc6));
      be(n, 4);
    }
  }
  void uint(uint64_t v) {
    if (v <= 0x7f) {
      out_.push_back(static_cast<char>(v));
    } else if (v <= 0xff) {
      out_.push_back(static_cast<char>(0xcc));
      be(v, 1);
    } else if (v <= 0xffff) {
      out_.push_back(static_cast<char>(0xcd));
      be(v, 2);
    } else if (v <= 0xffffffffu) {
      out_.push_back(static_cast<char>(0xce));
      be(v, 4);
    } else {
      out_.push_back(static_cast<char>(0xcf));
      be(v, 8);
    }
  }
  void kv(std::string_view key, std::string_view value) {
    str(key);
    str(value);
  }
  void kv(std::string_view key, uint64_t value) {
    str(key);
    uint(value);
  }
  std::string take() { return std::move(out_); }

 private:
  // fix form up to `fix_max`, else 16-bit or 32-bit length.
  void header(size_t n, uint8_t fix, size_t fix_max, uint8_t b16, uint8_t b32) {
    if (n <= fix_max) {
      out_.push_back(static_cast<char>(fix | n));
    } else if (n <= 0xffff) {
      out_.push_back(static_cast<char>(b16));
      be(n, 2);
    } else {
      out_.push_back(static_cast<char>(b32));
      be(n, 4);
    }
  }
  void be(uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

void versions_array(Writer& w, const std::vector<int>& versions) {
  w.array(versions.size());
  for (int v : versions) w.uint(static_cast<uint64_t>(v));
}

// Typed access to the decoded envelope, with errors that name the key.
class Fields {
 public:
  explicit Fields(const json& map) : map_(map) {}

  const json* find(const char* key) const {
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : &*it;
  }
  const json& required(const char* key) const {
    const json* v = find(key);
    if (!v) throw DecodeError(std::string("missing key \"") + key + "\"", key);
    return *v;
  }
  uint64_t uint(const char* key, uint64_t max = UINT64_MAX) const { return as_uint(required(key), key, max); }
  uint64_t uint_or(const char* key, uint64_t fallback, uint64_t max = UINT64_MAX) const {
    const json* v = find(key);
    return v ? as_uint(*v, key, max) : fallback;
  }
  std::string str(const char* key, size_t max_bytes) const { return as_str(required(key), key, max_bytes); }
  std::string str_or(const char* key, size_t max_bytes) const {
    const json* v = find(key);
    return v ? as_str(*v, key, max_bytes) : std::string();
  }
  std::vector<int> versions(const char* key) const {
    const json& v = required(key);
    if (!v.is_array() || v.empty() || v.size() > kMaxVersions) {
      throw DecodeError(
          std::string("\"") + key + "\" must be an array of 1.." + std::to_string(kMaxVersions) + " protocol versions",
          key);
    }
    std::vector<int> out;
    for (const json& x : v) out.push_back(static_cast<int>(as_uint(x, key, 1000000)));
    return out;
  }

  static uint64_t as_uint(const json& v, const char* key, uint64_t max) {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      throw DecodeError(std::string("\"") + key + "\" must be an unsigned integer", key);
    }
    const uint64_t x = v.get<uint64_t>();
    if (x > max) throw DecodeError(std::string("\"") + key + "\" exceeds " + std::to_string(max), key);
    return x;
  }
  static std::string as_str(const json& v, const char* key, size_t max_bytes) {
    if (!v.is_string()) throw DecodeError(std::string("\"") + key + "\" must be a string", key);
    const auto& s = v.get_ref<const std::string&>();
    if (s.size() > max_bytes) {
      throw DecodeError(std::string("\"") + key + "\" is longer than " + std::to_string(max_bytes) + " bytes", key);
    }
    if (!msgpack::valid_utf8(s)) throw DecodeError(std::string("\"") + key + "\" is not valid UTF-8", key);
    return s;
  }

 private:
  const json& map_;
};

bool is_map_byte(unsigned char b) { return (b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf; }

bool version_known(uint64_t v) {
  const auto& s = supported_versions();
  return std::find(s.begin(), s.end(), static_cast<int>(v)) != s.end();
}

std::string check_chars(std::string_view s, size_t max_bytes, std::string_view extra, const char* what) {
  if (s.empty() || s.size() > max_bytes) {
    return std::string(what) + " must be 1.." + std::to_string(max_bytes) + " bytes long, got " +
           std::to_string(s.size());
  }
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    extra.find(c) != std::string_view::npos;
    if (!ok) return std::string(what) + " may hold only letters, digits and \"" + std::string(extra) + "\"";
  }
  return "";
}

void decode_traj_body(const Fields& f, Traj& t);

Message decode_traj(const Fields& f) {
  Traj t;
  t.seq = f.uint("seq");
  if (t.seq == 0) throw DecodeError("\"seq\" must be at least 1", "seq");
  try {
    decode_traj_body(f, t);
  } catch (DecodeError& e) {
    e.traj_seq = t.seq;
    throw;
  }
  return t;
}

void decode_traj_body(const Fields& f, Traj& t) {
  t.id = f.str("id", kMaxTrajectoryIdBytes);
  if (t.id.empty()) throw DecodeError("\"id\" must not be empty", "id");
  const json& data = f.required("data");
  if (!data.is_binary()) throw DecodeError("\"data\" must be bin (the MessagePack bytes of the trajectory)", "data");
  const auto& bytes = data.get_binary();
  t.data.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (t.data.empty() || !is_map_byte(static_cast<unsigned char>(t.data[0]))) {
    throw DecodeError("\"data\" must hold a MessagePack map (the trajectory object)", "data");
  }
  if (std::string why = msgpack::check(t.data, kMaxDataDepth); !why.empty()) {
    throw DecodeError("\"data\" is not one well-formed MessagePack value: " + why, "data");
  }
}

// The receiver's hot path: a traj is a flat map of scalars, read here in
// place (the payload is copied once, into Traj::data). Anything unusual
// (another type, a container value, bad lengths or values) returns nothing,
// and the general decoder then accepts it or says precisely what is wrong.
class FlatMapReader {
 public:
  explicit FlatMapReader(std::string_view bytes)
      : p_(reinterpret_cast<const unsigned char*>(bytes.data())), n_(bytes.size()) {}

  bool map_header(uint64_t* count) {
    if (pos_ >= n_) return false;
    const unsigned char b = p_[pos_++];
    if (b >= 0x80 && b <= 0x8f) {
      *count = b & 0x0f;
      return true;
    }
    if (b == 0xde) return be(2, count);
    if (b == 0xdf) return be(4, count);
    return false;
  }
  bool str(std::string_view* out) {
    if (pos_ >= n_) return false;
    const unsigned char b = p_[pos_++];
    uint64_t len = 0;
    if (b >= 0xa0 && b <= 0xbf) {
      len = b & 0x1f;
    } else if (b < 0xd9 || b > 0xdb || !be(b == 0xd9 ? 1 : b == 0xda ? 2 : 4, &len)) {
      return false;
    }
    return take(len, out);
  }
  // A scalar value: an unsigned integer, a string or bin. False for anything
  // else (the general decoder handles it).
  bool scalar(uint64_t* u, std::string_view* bytes, bool* is_uint, bool* is_bin) {
    if (pos_ >= n_) return false;
    const unsigned char b = p_[pos_];
    *is_uint = *is_bin = false;
    if (b <= 0x7f) {
      ++pos_;
      *u = b;
      *is_uint = true;
      return true;
    }
    if (b >= 0xcc && b <= 0xcf) {
      ++pos_;
      *is_uint = true;
      return be(1 << (b - 0xcc), u);
    }
    if (b >= 0xc4 && b <= 0xc6) {
      ++pos_;
      uint64_t len = 0;
      *is_bin = true;
      return be(1 << (b - 0xc4), &len) && take(len, bytes);
    }
    return str(bytes);
  }
  bool at_end() const { return pos_ == n_; }

 private:
  bool be(int bytes, uint64_t* out) {
    if (n_ - pos_ < static_cast<size_t>(bytes)) return false;
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | p_[pos_++];
    *out = v;
    return true;
  }
  bool take(uint64_t len, std::string_view* out) {
    if (n_ - pos_ < len) return false;
    *out = std::string_view(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return true;
  }
  const unsigned char* p_;
  size_t n_;
  size_t pos_ = 0;
};

std::optional<Traj> decode_traj_fast(std::string_view frame) {
  FlatMapReader r(frame);
  uint64_t count = 0;
  if (!r.map_header(&count) || count > 16) return std::nullopt;
  std::string_view type, id, data;
  uint64_t v = 0, seq = 0;
  bool have_v = false, have_seq = false, have_id = false, have_data = false;
  for (uint64_t i = 0; i < count; ++i) {
    std::string_view key, bytes;
    uint64_t u = 0;
    bool is_uint = false, is_bin = false;
    if (!r.str(&key) || !r.scalar(&u, &bytes, &is_uint, &is_bin)) return std::nullopt;
    if (key == "type") {
      if (is_uint || is_bin) return std::nullopt;
      type = bytes;
    } else if (key == "v" || key == "seq") {
      if (!is_uint) return std::nullopt;
      (key == "v" ? v : seq) = u;
      (key == "v" ? have_v : have_seq) = true;
    } else if (key == "id") {
      if (is_uint || is_bin) return std::nullopt;
      id = bytes;
      have_id = true;
    } else if (key == "data") {
      if (!is_bin) return std::nullopt;
      data = bytes;
      have_data = true;
    }
  }
  if (!r.at_end() || type != "traj" || !have_v || !have_seq || !have_id || !have_data) return std::nullopt;
  if (!version_known(v) || seq == 0 || id.empty() || id.size() > kMaxTrajectoryIdBytes || !msgpack::valid_utf8(id) ||
      data.empty() || !is_map_byte(static_cast<unsigned char>(data[0])) ||
      !msgpack::check(data, kMaxDataDepth).empty()) {
    return std::nullopt;
  }
  Traj t;
  t.seq = seq;
  t.id.assign(id);
  t.data.assign(data);
  return t;
}

}  // namespace

const std::vector<int>& supported_versions() {
  static const std::vector<int> kVersions = {kVersion};
  return kVersions;
}

const std::string& error_code_name(ErrorCode code) {
  static const std::vector<std::string> kNames = error_code_names();
  return kNames[static_cast<size_t>(code)];
}

std::optional<ErrorCode> error_code_from_name(std::string_view name) {
  for (const auto& [code, n] : kCodes) {
    if (name == n) return code;
  }
  return std::nullopt;
}

std::vector<std::string> error_code_names() {
  std::vector<std::string> out;
  for (const auto& entry : kCodes) out.emplace_back(entry.second);
  return out;
}

std::string_view type_name(const Message& message) {
  static constexpr std::array<std::string_view, 8> kNames = {"hello",   "traj", "heartbeat", "bye",
                                                             "welcome", "ack",  "credit",    "error"};
  return kNames[message.index()];
}

std::string check_worker_id(std::string_view worker) {
  return check_chars(worker, kMaxWorkerIdBytes, "._:@+-", "a worker id");
}

std::string check_instance(std::string_view instance) {
  return check_chars(instance, kMaxInstanceBytes, "._-", "a spool instance id");
}

Message decode(std::string_view frame) {
  if (auto t = decode_traj_fast(frame)) return std::move(*t);
  json map;
  try {
    map = msgpack::decode(frame, kMaxEnvelopeDepth);
  } catch (const std::exception& e) {
    throw DecodeError(std::string("not one well-formed MessagePack value: ") + e.what());
  }
  if (!map.is_object()) throw DecodeError("a message must be a MessagePack map");
  const Fields f(map);
  const std::string type = f.str("type", 32);
  if (type == "hello") {
    // Any "v": hello is how versions are negotiated.
    Hello h;
    h.versions = f.versions("versions");
    h.worker = f.str("worker", kMaxWorkerIdBytes);
    if (std::string why = check_worker_id(h.worker); !why.empty()) throw DecodeError("\"worker\": " + why, "worker");
    h.instance = f.str("instance", kMaxInstanceBytes);
    if (std::string why = check_instance(h.instance); !why.empty()) {
      throw DecodeError("\"instance\": " + why, "instance");
    }
    h.heartbeat_ms = static_cast<uint32_t>(f.uint_or("heartbeat_ms", 1000, 3600000));
    h.next_seq = f.uint_or("next_seq", 0);
    h.unacked = f.uint_or("unacked", 0);
    h.software = f.str_or("software", 256);
    return h;
  }
  const uint64_t v = f.uint("v", 1000000);
  if (!version_known(v)) {
    throw DecodeError(
        "protocol version " + std::to_string(v) + " is not one this build speaks (" + std::to_string(kVersion) + ")",
        "v");
  }
  if (type == "traj") return decode_traj(f);
  if (type == "heartbeat") return Heartbeat{};
  if (type == "bye") return Bye{};
  if (type == "welcome") {
    Welcome w;
    w.version = static_cast<int>(v);
    w.receiver = f.str_or("receiver", 256);
    w.credit = f.uint("credit");
    w.heartbeat_ms = static_cast<uint32_t>(f.uint_or("heartbeat_ms", 1000, 3600000));
    w.max_message_bytes = f.uint_or("max_message_bytes", 0);
    w.acked_through = f.uint_or("acked_through", 0);
    return w;
  }
  if (type == "ack") {
    const json& ranges = f.required("ranges");
    if (!ranges.is_array() || ranges.size() > kMaxAckRanges) {
      throw DecodeError(
          "\"ranges\" must be an array of at most " + std::to_string(kMaxAckRanges) + " [first, last] pairs", "ranges");
    }
    Ack a;
    for (const json& r : ranges) {
      if (!r.is_array() || r.size() != 2) throw DecodeError("each of \"ranges\" must be [first, last]", "ranges");
      const uint64_t first = Fields::as_uint(r[0], "ranges", UINT64_MAX);
      const uint64_t last = Fields::as_uint(r[1], "ranges", UINT64_MAX);
      if (first == 0 || first > last) throw DecodeError("a range must have 1 <= first <= last", "ranges");
      a.ranges.emplace_back(first, last);
    }
    return a;
  }
  if (type == "credit") return Credit{f.uint("credit")};
  if (type == "error") {
    Error e;
    e.code = f.str("code", 64);
    e.message = f.str_or("message", kMaxErrorMessageBytes);
    if (const json* s = f.find("seq")) e.seq = Fields::as_uint(*s, "seq", UINT64_MAX);
    if (f.find("versions")) e.versions = f.versions("versions");
    return e;
  }
  throw DecodeError("unknown message type \"" + type + "\"", "type");
}

std::string encode_traj_header(uint64_t seq, std::string_view id, size_t data_bytes, int version) {
  Writer w(traj_overhead(id.size()));
  w.map(5);
  w.kv("v", static_cast<uint64_t>(version));
  w.kv("type", "traj");
  w.kv("seq", seq);
  w.kv("id", id);
  w.str("data");
  w.bin_header(data_bytes);
  return w.take();
}

std::string encode_traj(uint64_t seq, std::string_view id, std::string_view data, int version) {
  std::string frame = encode_traj_header(seq, id, data.size(), version);
  frame.append(data);
  return frame;
}

size_t traj_overhead(size_t id_bytes) {
  // map + "v" + 1 + "type"/"traj" + "seq" + uint64 + "id" + str header + "data" + bin32 header.
  return 1 + 2 + 9 + 10 + 4 + 9 + 3 + 5 + id_bytes + 5 + 5;
}

std::string encode(const Message& message, int version) {
  if (const auto* t = std::get_if<Traj>(&message)) return encode_traj(t->seq, t->id, t->data, version);
  const uint64_t v = static_cast<uint64_t>(version);
  Writer w(128);
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Hello>) {
          w.map(m.software.empty() ? 8 : 9);
          // "v" of a hello is the newest version the sender speaks.
          w.kv("v", m.versions.empty() ? v : static_cast<uint64_t>(m.versions.front()));
          w.kv("type", "hello");
          w.str("versions");
          versions_array(w, m.versions);
          w.kv("worker", m.worker);
          w.kv("instance", m.instance);
          w.kv("heartbeat_ms", m.heartbeat_ms);
          w.kv("next_seq", m.next_seq);
          w.kv("unacked", m.unacked);
          if (!m.software.empty()) w.kv("software", m.software);
        } else if constexpr (std::is_same_v<T, Heartbeat> || std::is_same_v<T, Bye>) {
          w.map(2);
          w.kv("v", v);
          w.kv("type", std::is_same_v<T, Heartbeat> ? "heartbeat" : "bye");
        } else if constexpr (std::is_same_v<T, Welcome>) {
          w.map(7);
          w.kv("v", static_cast<uint64_t>(m.version));
          w.kv("type", "welcome");
          w.kv("receiver", m.receiver);
          w.kv("credit", m.credit);
          w.kv("heartbeat_ms", m.heartbeat_ms);
          w.kv("max_message_bytes", m.max_message_bytes);
          w.kv("acked_through", m.acked_through);
        } else if constexpr (std::is_same_v<T, Ack>) {
          w.map(3);
          w.kv("v", v);
          w.kv("type", "ack");
          w.str("ranges");
          w.array(m.ranges.size());
          for (const auto& [first, last] : m.ranges) {
            w.array(2);
            w.uint(first);
            w.uint(last);
          }
        } else if constexpr (std::is_same_v<T, Credit>) {
          w.map(3);
          w.kv("v", v);
          w.kv("type", "credit");
          w.kv("credit", m.credit);
        } else if constexpr (std::is_same_v<T, Error>) {
          // Cut at a character boundary so that the message stays UTF-8.
          const size_t cut = utf8_prefix_bytes(m.message, kMaxErrorMessageBytes);
          w.map(4 + (m.seq ? 1 : 0) + (m.versions.empty() ? 0 : 1));
          w.kv("v", v);
          w.kv("type", "error");
          w.kv("code", m.code);
          w.kv("message", std::string_view(m.message).substr(0, cut));
          if (m.seq) w.kv("seq", *m.seq);
          if (!m.versions.empty()) {
            w.str("versions");
            versions_array(w, m.versions);
          }
        }
      },
      message);
  return w.take();
}

std::vector<std::pair<uint64_t, uint64_t>> to_ranges(std::vector<uint64_t> seqs) {
  std::sort(seqs.begin(), seqs.end());
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (uint64_t s : seqs) {
    if (!out.empty() && s <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, s);
    } else {
      out.emplace_back(s, s);
    }
  }
  return out;
}

}  // namespace kforge::rollout::stream
