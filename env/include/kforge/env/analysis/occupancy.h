// Theoretical occupancy: how many blocks of a kernel fit on one SM, given its
// registers per thread, shared memory per block and block size, and which
// resource runs out first. The same rules as the CUDA occupancy calculator
// (cuda_occupancy.h): registers are allocated per warp in units of 256 and
// split over the SM's 4 sub-partitions; shared memory per block is rounded up
// to 128 bytes after adding the 1 KB the driver reserves per block (sm_80+).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"

namespace kforge::env {

struct DeviceProperties;

// Per-SM limits of one compute capability.
struct ArchLimits {
  std::string arch;    // "sm_90"
  std::string source;  // where the numbers come from, for the facts
  int warp_size = 32;
  int max_threads_per_block = 1024;
  int max_threads_per_sm = 2048;
  int max_warps_per_sm = 64;
  int max_blocks_per_sm = 32;
  int registers_per_sm = 65536;
  int max_registers_per_block = 65536;
  int max_registers_per_thread = 255;
  int register_allocation_unit = 256;  // registers, per warp
  int register_subpartitions = 4;
  int64_t shared_bytes_per_sm = 0;
  int64_t shared_bytes_per_block = int64_t{48} * 1024;  // without the opt-in attribute
  int64_t shared_bytes_per_block_optin = 0;
  int64_t reserved_shared_bytes_per_block = 1024;
  int64_t shared_allocation_unit = 128;
};

// "sm_80", "sm_86", "sm_89", "sm_90" (suffixes such as "a" are ignored), or
// nullopt for an architecture the table does not know.
std::optional<ArchLimits> arch_limits(const std::string& arch);
std::vector<std::string> known_archs();
// The table's limits for the device's arch, overridden by whatever the device
// reported. Throws InputError for an unknown arch whose device properties do
// not give the limits.
ArchLimits limits_for_device(const DeviceProperties& device);

struct OccupancyQuery {
  int threads_per_block = 0;
  int registers_per_thread = 0;
  int64_t static_shared_bytes = 0;
  int64_t dynamic_shared_bytes = 0;
};

struct OccupancyResult {
  bool launchable = true;
  std::string launch_error;  // why a launch with this configuration fails
  int warps_per_block = 0;
  int registers_per_warp = 0;          // allocated, after rounding
  int64_t shared_bytes_per_block = 0;  // allocated: static + dynamic + reserved, rounded
  // Blocks per SM each resource allows, capped at max_blocks_per_sm (an
  // unused resource allows the cap).
  int blocks_by_warps = 0;
  int blocks_by_registers = 0;
  int blocks_by_shared = 0;
  int blocks_by_block_limit = 0;
  int active_blocks = 0;
  int active_warps = 0;
  int max_warps = 0;
  double occupancy = 0.0;  // active_warps / max_warps
  // What holds active_blocks down, most actionable first: "registers" and
  // "shared_memory" (only when the block size alone would allow more blocks),
  // "warps" (the block size does not divide the SM's warps), "blocks" (the
  // blocks-per-SM limit). Several when they tie.
  std::vector<std::string> limited_by;
  bool needs_shared_optin = false;  // more than 48 KB per block
};

OccupancyResult compute_occupancy(const ArchLimits& limits, const OccupancyQuery& query);

// The largest registers per thread (a multiple the allocator honours) that
// still allows `blocks` blocks per SM; 0 if even the minimum does not.
int max_registers_for_blocks(const ArchLimits& limits, int threads_per_block, int blocks);
// The largest static + dynamic shared memory per block that still allows
// `blocks` blocks per SM; -1 if none does.
int64_t max_shared_for_blocks(const ArchLimits& limits, int blocks);

struct WaveInfo {
  int64_t grid_blocks = 0;
  int64_t blocks_per_wave = 0;  // active blocks per SM x SM count
  double waves = 0.0;           // grid_blocks / blocks_per_wave
  int64_t full_waves = 0;
  // Share of the last wave's slots that hold a block (1.0: no tail).
  double last_wave_fill = 0.0;
};

WaveInfo compute_waves(int64_t grid_blocks, int active_blocks_per_sm, int sm_count);

json to_json(const ArchLimits& limits);
json to_json(const OccupancyResult& result);
json to_json(const WaveInfo& waves);

}  // namespace kforge::env
