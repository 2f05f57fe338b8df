// The spool's on-disk format (trajectory_spool.h): segment files of records,
// each a 24-byte header (magic, payload length, seq, id length, reserved,
// CRC-32C) then the id and the payload; integers little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kforge::rollout::internal {

inline constexpr char kSpoolMagic[4] = {'K', 'F', 'R', '1'};
inline constexpr size_t kSpoolHeaderBytes = 24;
// The version of spool.json, which names the worker and the instance.
inline constexpr int kSpoolFormat = 1;
inline constexpr uint64_t kMinSegment = uint64_t{64} << 10;
inline constexpr uint64_t kMaxSegment = uint64_t{64} << 20;
// The ack log is rewritten (keeping only what live segments need) past this.
inline constexpr uint64_t kAckLogCompactBytes = uint64_t{1} << 20;

inline void put_le(char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

inline uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Over the header's bytes 4..19 (everything but the magic and the CRC), the
// id and the payload.
uint32_t record_crc(const char* header, std::string_view id, std::string_view payload);

// A new spool's instance: 32 hex digits, so that a receiver tells a spool
// that was deleted and started again from the one it knew.
std::string random_instance();

std::string segment_name(uint64_t first_seq);

// First seq from "seg-<20 digits>.kfs", or 0 if the name is not a segment's.
uint64_t parse_segment_name(const std::string& name);

}  // namespace kforge::rollout::internal
