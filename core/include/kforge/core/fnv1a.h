// FNV-1a, 64 bits: a cheap, stable hash of a string for deriving seeds from
// names (a tensor's name, an episode's id). Not for hash tables facing
// outside input and not a checksum (sha256.h, crc32c are). Seeds derived
// with it are part of recorded results, so its values are pinned below.
#pragma once

#include <cstdint>
#include <string_view>

namespace kforge {

constexpr uint64_t fnv1a(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;  // offset basis
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;  // FNV prime
  }
  return h;
}

// The published test vectors of FNV-1a 64.
static_assert(fnv1a("") == 0xcbf29ce484222325ULL && fnv1a("a") == 0xaf63dc4c8601ec8cULL &&
              fnv1a("foobar") == 0x85944171f73967e8ULL);

}  // namespace kforge
