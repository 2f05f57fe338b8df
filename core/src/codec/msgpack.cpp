#include "kforge/core/msgpack.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace kforge::msgpack {
namespace {

// Big-endian unsigned integer of `n` bytes at `p`.
uint64_t read_be(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

// How a value of a type byte 0xc0..0xdf is laid out: `fixed` bytes, then a
// big-endian length of `len_bytes` that counts payload bytes (str, bin, ext)
// or items (array, map).
struct Layout {
  bool valid = true;
  uint8_t fixed = 0;
  uint8_t len_bytes = 0;
  bool container = false;
  bool map = false;
};

constexpr Layout kInvalidLayout = {false, 0, 0, false, false};
constexpr Layout fixed_layout(uint8_t n) { return {true, n, 0, false, false}; }
constexpr Layout sized_layout(uint8_t len, uint8_t extra = 0) { return {true, extra, len, false, false}; }
constexpr Layout array_layout(uint8_t len) { return {true, 0, len, true, false}; }
constexpr Layout map_layout(uint8_t len) { return {true, 0, len, true, true}; }

const Layout kTypedLayouts[32] = {
    fixed_layout(0),    kInvalidLayout,     fixed_layout(0),    fixed_layout(0),  // nil, (never used), false, true
    sized_layout(1),    sized_layout(2),    sized_layout(4),                      // bin 8/16/32
    sized_layout(1, 1), sized_layout(2, 1), sized_layout(4, 1),                   // ext 8/16/32 (+ type byte)
    fixed_layout(4),    fixed_layout(8),                                          // float 32/64
    fixed_layout(1),    fixed_layout(2),    fixed_layout(4),    fixed_layout(8),  // uint 8..64
    fixed_layout(1),    fixed_layout(2),    fixed_layout(4),    fixed_layout(8),  // int 8..64
    fixed_layout(2),    fixed_layout(3),    fixed_layout(5),    fixed_layout(9),  // fixext 1/2/4/8 (+ type byte)
    fixed_layout(17),                                                             // fixext 16
    sized_layout(1),    sized_layout(2),    sized_layout(4),                      // str 8/16/32
    array_layout(2),    array_layout(4),    map_layout(2),      map_layout(4),    // array 16/32, map 16/32
};

}  // namespace

std::string check(std::string_view payload, int max_depth) {
  const auto* data = reinterpret_cast<const unsigned char*>(payload.data());
  const size_t size = payload.size();
  size_t pos = 0;
  // Items still to read in each open container; the bottom entry is the one
  // top-level value.
  std::vector<uint64_t> open = {1};
  while (!open.empty()) {
    if (pos >= size) return "truncated after " + std::to_string(pos) + " bytes";
    const unsigned char b = data[pos++];
    --open.back();
    Layout h;
    uint64_t children = 0;  // items of a container that starts here
    uint64_t skip = 0;      // payload bytes after the header
    if (b <= 0x7f || b >= 0xe0) {
      // fixint: the byte is the value
    } else if (b <= 0x9f) {
      h.container = true;
      h.map = b <= 0x8f;
      children = b & 0x0f;
    } else if (b <= 0xbf) {
      skip = b & 0x1f;  // fixstr
    } else {
      h = kTypedLayouts[b - 0xc0];
      if (!h.valid)
        return "byte " + std::to_string(b) + " at offset " + std::to_string(pos - 1) + " is not a MessagePack type";
      skip = h.fixed;
      if (h.len_bytes > 0) {
        if (size - pos < h.len_bytes) return "truncated length at offset " + std::to_string(pos);
        const uint64_t n = read_be(data + pos, h.len_bytes);
        pos += h.len_bytes;
        if (h.container) {
          children = n;
        } else {
          skip += n;
        }
      }
    }
    if (skip > size - pos) return "truncated value at offset " + std::to_string(pos);
    pos += static_cast<size_t>(skip);
    if (h.container) {
      const uint64_t items = h.map ? 2 * children : children;
      // Each item takes at least one byte: a count beyond what is left is a
      // lie, and trusting it would make the decoder reserve huge arrays.
      if (items > size - pos) return "container at offset " + std::to_string(pos) + " claims more items than bytes";
      if (items > 0) {
        if (static_cast<int>(open.size()) >= max_depth) {
          return "nested deeper than " + std::to_string(max_depth) + " levels";
        }
        open.push_back(items);
      }
    }
    while (!open.empty() && open.back() == 0) open.pop_back();
  }
  if (pos != size) return std::to_string(size - pos) + " trailing bytes after the message";
  return "";
}

namespace {

// Builds the DOM of a payload that check() accepted, so it never meets a
// truncated value, a lying count or excess depth. nlohmann's own msgpack
// reader fetches a string one byte per call: a 1 MiB string cost ~6 ms, and a
// flood of them held the env server's socket thread (bench/server). Here a
// string or binary is one copy. The stack is an explicit vector.
class Builder {
 public:
  explicit Builder(const unsigned char* data) : d_(data) {}

  json build() {
    json root;
    do {
      if (!stack_.empty() && stack_.back().map) read_key();
      place(read_value(), &root);
      while (!stack_.empty() && stack_.back().left == 0) stack_.pop_back();
    } while (!stack_.empty());
    return root;
  }

 private:
  struct Frame {
    json* value;
    uint64_t left;  // items (arrays) or entries (maps) still to read
    bool map;
    json* slot = nullptr;  // a map's value for the key just read
  };

  // A value, or an empty container whose items follow (pending_ says how many).
  json read_value() {
    const unsigned char b = d_[pos_++];
    pending_ = 0;
    if (b <= 0x7f) return static_cast<json::number_unsigned_t>(b);
    if (b >= 0xe0) return static_cast<json::number_integer_t>(static_cast<int8_t>(b));
    if (b <= 0x8f) return open(json::object(), b & 0x0fU);
    if (b <= 0x9f) return open(json::array(), b & 0x0fU);
    if (b <= 0xbf) return text(b & 0x1f);
    if (b == 0xc0) return nullptr;
    if (b == 0xc2) return false;
    if (b == 0xc3) return true;
    if ((b >= 0xc4 && b <= 0xc9) || (b >= 0xd4 && b <= 0xd8)) return read_binary(b);
    if (b >= 0xca && b <= 0xd3) return read_number(b);
    if (b >= 0xd9 && b <= 0xdf) return read_sized(b);
    throw DecodeError("byte " + std::to_string(b) + " is not a MessagePack type");  // 0xc1: check() refused it
  }

  // bin 8/16/32, ext 8/16/32 and fixext 1..16.
  json read_binary(unsigned char b) {
    switch (b) {
      case 0xc4:
        return bytes(take(1), false);
      case 0xc5:
        return bytes(take(2), false);
      case 0xc6:
        return bytes(take(4), false);
      case 0xc7:
        return bytes(take(1), true);
      case 0xc8:
        return bytes(take(2), true);
      case 0xc9:
        return bytes(take(4), true);
      default:
        return bytes(uint64_t{1} << (b - 0xd4), true);  // fixext 0xd4..0xd8: 1, 2, 4, 8, 16 bytes
    }
  }

  // float 32/64, uint 8..64, int 8..64.
  json read_number(unsigned char b) {
    switch (b) {
      case 0xca: {
        const auto bits = static_cast<uint32_t>(take(4));
        float f = 0;
        std::memcpy(&f, &bits, sizeof f);
        return static_cast<double>(f);
      }
      case 0xcb: {
        const uint64_t bits = take(8);
        double f = 0;
        std::memcpy(&f, &bits, sizeof f);
        return f;
      }
      case 0xcc:
      case 0xcd:
      case 0xce:
      case 0xcf:
        return static_cast<json::number_unsigned_t>(take(1 << (b - 0xcc)));  // 1, 2, 4, 8 bytes
      case 0xd0:
        return static_cast<json::number_integer_t>(static_cast<int8_t>(take(1)));
      case 0xd1:
        return static_cast<json::number_integer_t>(static_cast<int16_t>(take(2)));
      case 0xd2:
        return static_cast<json::number_integer_t>(static_cast<int32_t>(take(4)));
      default:
        return static_cast<json::number_integer_t>(static_cast<int64_t>(take(8)));
    }
  }

  // str 8/16/32, array 16/32, map 16/32.
  json read_sized(unsigned char b) {
    switch (b) {
      case 0xd9:
        return text(take(1));
      case 0xda:
        return text(take(2));
      case 0xdb:
        return text(take(4));
      case 0xdc:
        return open(json::array(), take(2));
      case 0xdd:
        return open(json::array(), take(4));
      case 0xde:
        return open(json::object(), take(2));
      default:
        return open(json::object(), take(4));
    }
  }

  void read_key() {
    const unsigned char b = d_[pos_];
    uint64_t len = 0;
    if (b >= 0xa0 && b <= 0xbf) {
      ++pos_;
      len = b & 0x1f;
    } else if (b >= 0xd9 && b <= 0xdb) {
      ++pos_;
      len = take(b == 0xd9 ? 1 : b == 0xda ? 2 : 4);
    } else {
      throw DecodeError("a map key at offset " + std::to_string(pos_) + " is not a string");
    }
    std::string k(reinterpret_cast<const char*>(d_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    Frame& top = stack_.back();
    // nlohmann keeps the last copy of a repeated key silently; JSON and YAML
    // documents refuse them too, so a message means one thing to every reader.
    if (top.value->contains(k)) {
      throw DecodeError("a map repeats the key \"" + (k.size() > 60 ? k.substr(0, 57) + "..." : k) + "\"");
    }
    top.slot = &(*top.value)[k];
  }

  void place(json value, json* root) {
    const uint64_t items = pending_;
    const bool map = value.is_object();
    json* at = root;
    if (stack_.empty()) {
      *root = std::move(value);
    } else {
      Frame& top = stack_.back();
      if (top.map) {
        at = top.slot;
        *at = std::move(value);
      } else {
        top.value->push_back(std::move(value));
        at = &top.value->back();
      }
      --top.left;
    }
    if (items > 0) {
      // check() bounded the count by the bytes left.
      if (!map) at->get_ref<json::array_t&>().reserve(static_cast<size_t>(items));
      stack_.push_back({at, items, map});
    }
  }

  json open(json container, uint64_t items) {
    pending_ = items;
    return container;
  }

  json text(uint64_t len) {
    json v = std::string(reinterpret_cast<const char*>(d_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return v;
  }

  // bin (ext = false) or ext / fixext (ext = true: a type byte first).
  json bytes(uint64_t len, bool ext) {
    const int8_t type = ext ? static_cast<int8_t>(d_[pos_++]) : 0;
    json::binary_t::container_type v(d_ + pos_, d_ + pos_ + len);
    pos_ += static_cast<size_t>(len);
    return ext ? json::binary(std::move(v), static_cast<std::uint8_t>(type)) : json::binary(std::move(v));
  }

  uint64_t take(int n) {
    const uint64_t v = read_be(d_ + pos_, n);
    pos_ += static_cast<size_t>(n);
    return v;
  }

  const unsigned char* d_;
  size_t pos_ = 0;
  uint64_t pending_ = 0;
  std::vector<Frame> stack_;
};

}  // namespace

json decode(std::string_view payload, int max_depth) {
  if (std::string why = check(payload, max_depth); !why.empty()) throw DecodeError(why);
  return Builder(reinterpret_cast<const unsigned char*>(payload.data())).build();
}

std::string encode(const json& value) {
  std::string out;
  json::to_msgpack(value, out);
  return out;
}

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // ASCII eight bytes at a time: most protocol text is ASCII.
    while (n - i >= 8) {
      uint64_t w = 0;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = p[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

}  // namespace kforge::msgpack
