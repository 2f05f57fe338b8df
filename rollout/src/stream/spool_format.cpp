#include "spool_format.h"

#include <cstdio>
#include <random>

#include "crc32c.h"

namespace kforge::rollout::internal {

uint32_t record_crc(const char* header, std::string_view id, std::string_view payload) {
  uint32_t crc = crc32c(0, header + 4, 16);
  crc = crc32c(crc, id.data(), id.size());
  return crc32c(crc, payload.data(), payload.size());
}

std::string random_instance() {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 4; ++i) {
    uint32_t x = rd();
    for (int j = 0; j < 8; ++j, x >>= 4) out += kHex[x & 15];
  }
  return out;
}

std::string segment_name(uint64_t first_seq) {
  char name[40];
  std::snprintf(name, sizeof name, "seg-%020llu.kfs", static_cast<unsigned long long>(first_seq));
  return name;
}

uint64_t parse_segment_name(const std::string& name) {
  if (name.size() != 28 || name.rfind("seg-", 0) != 0 || name.substr(24) != ".kfs") return 0;
  uint64_t v = 0;
  for (size_t i = 4; i < 24; ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return v;
}

}  // namespace kforge::rollout::internal
