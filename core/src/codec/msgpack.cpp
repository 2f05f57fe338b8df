#include "kforge/core/msgpack.h"

#include <cstdint>
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

// Builds the value as nlohmann's own DOM builder does, but refuses a map
// that repeats a key (nlohmann keeps the last copy silently; JSON and YAML
// documents refuse them too, so a message means one thing to every reader).
// Depth was bounded by check(); the stack here is an explicit vector.
class DomBuilder {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit DomBuilder(json* root) : root_(root) {}

  bool null() { return add(nullptr) != nullptr; }
  bool boolean(bool v) { return add(v) != nullptr; }
  bool number_integer(number_integer_t v) { return add(v) != nullptr; }
  bool number_unsigned(number_unsigned_t v) { return add(v) != nullptr; }
  bool number_float(number_float_t v, const string_t& /*text*/) { return add(v) != nullptr; }
  bool string(string_t& v) { return add(std::move(v)) != nullptr; }
  bool binary(binary_t& v) {
    const bool has_subtype = v.has_subtype();
    const auto subtype = v.subtype();
    json value = has_subtype ? json::binary(std::move(v), subtype) : json::binary(std::move(v));
    return add(std::move(value)) != nullptr;
  }
  bool start_object(std::size_t /*size*/) { return open(json::object()); }
  bool start_array(std::size_t /*size*/) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(string_t& k) {
    Frame& top = stack_.back();
    if (top.value->contains(k)) {
      error_ = "a map repeats the key \"" + (k.size() > 60 ? k.substr(0, 57) + "..." : k) + "\"";
      return false;
    }
    top.slot = &(*top.value)[k];
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const json::exception& e) {
    error_ = e.what();
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    json* value;
    json* slot;
  };
  json* add(json value) {
    if (stack_.empty()) {
      *root_ = std::move(value);
      return root_;
    }
    Frame& top = stack_.back();
    if (top.value->is_array()) {
      top.value->push_back(std::move(value));
      return &top.value->back();
    }
    *top.slot = std::move(value);
    return top.slot;
  }
  bool open(json container) {
    json* placed = add(std::move(container));
    stack_.push_back({placed, nullptr});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  json* root_;
  std::vector<Frame> stack_;
  std::string error_;
};

}  // namespace

json decode(std::string_view payload, int max_depth) {
  if (std::string why = check(payload, max_depth); !why.empty()) throw DecodeError(why);
  json root;
  DomBuilder builder(&root);
  bool ok = false;
  try {
    ok = json::sax_parse(payload.begin(), payload.end(), &builder, json::input_format_t::msgpack);
  } catch (const json::exception& e) {
    throw DecodeError(e.what());
  }
  if (!ok) throw DecodeError(builder.error().empty() ? "not one MessagePack value" : builder.error());
  return root;
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
