// CRC-32C (Castagnoli) of the spool's records: the SSE4.2 instruction where
// the CPU has it, a table otherwise. Written here rather than taken from zlib
// (whose CRC-32 is another polynomial anyway) because the GPU machines build
// without zlib's headers, and one checksum must read the same everywhere.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kforge::rollout::internal {

// Extends `crc` (0 to start) over `n` bytes.
uint32_t crc32c(uint32_t crc, const void* data, size_t n);

}  // namespace kforge::rollout::internal
