#include "ipc/hex_codec.h"

#include <stdexcept>

namespace kforge::ipc {
namespace {

int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string hex_encode(const void* data, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  const auto* bytes = static_cast<const uint8_t*>(data);
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return out;
}

std::vector<uint8_t> hex_decode(const std::string& text, size_t expected_size) {
  if (text.size() != expected_size * 2) {
    throw std::invalid_argument("hex handle has " + std::to_string(text.size()) + " characters, expected " +
                                std::to_string(expected_size * 2));
  }
  std::vector<uint8_t> out(expected_size);
  for (size_t i = 0; i < expected_size; ++i) {
    int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) throw std::invalid_argument("hex handle has a non-hex character at " + std::to_string(2 * i));
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

}  // namespace kforge::ipc
