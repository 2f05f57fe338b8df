// Sizing the GPU L2 flush of docs/architecture.md#timing: a buffer of twice the L2 that the
// device reports, written before every timed sample. Pure arithmetic here (unit
// tested without a GPU); the CUDA device does the writing.
#pragma once

#include <cstdint>
#include <string>

namespace kforge::judge {

struct L2FlushPlan {
  uint64_t l2_bytes = 0;     // what the flush assumes the L2 holds
  uint64_t flush_bytes = 0;  // bytes written per flush
  std::string source;        // "device" or "default (...)"
};

// 2x the reported L2, rounded up to 2 MiB (allocation granularity). A report
// of 0 or one below 1 MiB (a driver that does not know) falls back to 64 MiB,
// more than any current part; one above 1 GiB is clamped: no GPU has that much
// L2, and flushing gigabytes per sample would dominate the timing phase.
L2FlushPlan plan_l2_flush(int64_t reported_l2_bytes);

}  // namespace kforge::judge
