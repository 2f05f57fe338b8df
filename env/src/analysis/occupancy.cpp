#include "kforge/env/analysis/occupancy.h"

#include <algorithm>
#include <cctype>

#include "kforge/env/analysis.h"
#include "text_util.h"

namespace kforge::env {
namespace {

// Per-SM limits. Sources:
//  [PG]  CUDA C++ Programming Guide, "Technical Specifications per Compute
//        Capability" (CUDA 12.x/13.0): resident blocks, warps and threads per
//        SM; 64K 32-bit registers per SM and per block; 255 registers per
//        thread; shared memory per SM and per block (opt-in).
//  [OCC] cuda_occupancy.h of CUDA 13.0: registers allocated per warp in units
//        of 256 over 4 sub-partitions; shared memory allocated in units of
//        128 B on cc 8.x/9.x; 1 KB of shared memory reserved by the driver per
//        block from cc 8.0 (cudaDevAttrReservedSharedMemoryPerBlock); the
//        default carveout gives a block the whole per-SM maximum.
// Without cudaFuncSetAttribute(MaxDynamicSharedMemorySize) a block gets at
// most 48 KB [PG].
ArchLimits base(const std::string& arch) {
  ArchLimits l;
  l.arch = arch;
  l.source = "CUDA C++ Programming Guide (technical specifications per compute capability) and cuda_occupancy.h";
  return l;
}

const std::vector<ArchLimits>& table() {
  static const std::vector<ArchLimits> kTable = [] {
    std::vector<ArchLimits> t;
    // cc 8.0 (A100): 32 blocks, 64 warps (2048 threads); 164 KB shared per SM, 163 KB per block [PG].
    ArchLimits a = base("sm_80");
    a.max_threads_per_sm = 2048;
    a.max_warps_per_sm = 64;
    a.max_blocks_per_sm = 32;
    a.shared_bytes_per_sm = int64_t{164} * 1024;
    a.shared_bytes_per_block_optin = int64_t{163} * 1024;
    t.push_back(a);
    // cc 8.6 (GA10x): 16 blocks, 48 warps (1536 threads); 100 KB per SM, 99 KB per block [PG].
    ArchLimits b = base("sm_86");
    b.max_threads_per_sm = 1536;
    b.max_warps_per_sm = 48;
    b.max_blocks_per_sm = 16;
    b.shared_bytes_per_sm = int64_t{100} * 1024;
    b.shared_bytes_per_block_optin = int64_t{99} * 1024;
    t.push_back(b);
    // cc 8.9 (Ada): 24 blocks, 48 warps (1536 threads); 100 KB per SM, 99 KB per block [PG].
    ArchLimits c = base("sm_89");
    c.max_threads_per_sm = 1536;
    c.max_warps_per_sm = 48;
    c.max_blocks_per_sm = 24;
    c.shared_bytes_per_sm = int64_t{100} * 1024;
    c.shared_bytes_per_block_optin = int64_t{99} * 1024;
    t.push_back(c);
    // cc 9.0 (H100, H200): 32 blocks, 64 warps (2048 threads); 228 KB per SM, 227 KB per block [PG].
    ArchLimits d = base("sm_90");
    d.max_threads_per_sm = 2048;
    d.max_warps_per_sm = 64;
    d.max_blocks_per_sm = 32;
    d.shared_bytes_per_sm = int64_t{228} * 1024;
    d.shared_bytes_per_block_optin = int64_t{227} * 1024;
    t.push_back(d);
    return t;
  }();
  return kTable;
}

// "sm_90a" -> "sm_90": the arch-specific suffixes do not change the SM's limits.
std::string base_arch(const std::string& arch) {
  std::string s = arch;
  while (!s.empty() && std::isalpha(static_cast<unsigned char>(s.back())) && s.size() > 3) s.pop_back();
  return s;
}

int64_t round_up(int64_t x, int64_t unit) { return unit <= 0 ? x : (x + unit - 1) / unit * unit; }

int warps_for(const ArchLimits& l, int threads) { return (threads + l.warp_size - 1) / l.warp_size; }

// Blocks per SM the register file allows; -1 when one block alone exceeds the
// per-block register limit (the launch fails).
int blocks_by_registers(const ArchLimits& l, int regs, int warps) {
  if (regs <= 0) return l.max_blocks_per_sm;
  const int64_t per_warp = round_up(int64_t{regs} * l.warp_size, l.register_allocation_unit);
  // The hardware checks a block's registers as if its warps were spread over
  // every sub-partition.
  if (per_warp * round_up(warps, l.register_subpartitions) > l.max_registers_per_block) return -1;
  const int64_t warps_per_partition = (l.registers_per_sm / l.register_subpartitions) / per_warp;
  return static_cast<int>(warps_per_partition * l.register_subpartitions / warps);
}

}  // namespace

std::optional<ArchLimits> arch_limits(const std::string& arch) {
  const std::string b = base_arch(arch);
  for (const auto& l : table()) {
    if (l.arch == b) return l;
  }
  return std::nullopt;
}

std::vector<std::string> known_archs() {
  std::vector<std::string> out;
  for (const auto& l : table()) out.push_back(l.arch);
  return out;
}

ArchLimits limits_for_device(const DeviceProperties& device) {
  std::optional<ArchLimits> found = arch_limits(device.arch);
  ArchLimits l;
  if (found) {
    l = *found;
  } else {
    if (device.max_threads_per_sm <= 0 || device.max_blocks_per_sm <= 0 || device.registers_per_sm <= 0 ||
        device.shared_bytes_per_sm <= 0) {
      throw InputError("no occupancy limits for " + device.arch + " (known: " + internal::join(known_archs()) +
                       "); give the device's max_threads_per_sm, max_blocks_per_sm, registers_per_sm and "
                       "shared_bytes_per_sm");
    }
    l = base(base_arch(device.arch));
    l.source = "device properties";
  }
  bool overridden = false;
  auto take = [&](auto& dst, auto v) {
    if (v > 0 && dst != v) {
      dst = v;
      overridden = true;
    }
  };
  take(l.max_threads_per_sm, device.max_threads_per_sm);
  take(l.max_threads_per_block, device.max_threads_per_block);
  take(l.max_blocks_per_sm, device.max_blocks_per_sm);
  take(l.registers_per_sm, device.registers_per_sm);
  take(l.shared_bytes_per_sm, device.shared_bytes_per_sm);
  take(l.shared_bytes_per_block_optin, device.shared_bytes_per_block_optin);
  take(l.reserved_shared_bytes_per_block, device.reserved_shared_bytes_per_block);
  l.max_warps_per_sm = l.max_threads_per_sm / l.warp_size;
  if (l.shared_bytes_per_block_optin <= 0) l.shared_bytes_per_block_optin = l.shared_bytes_per_sm;
  if (overridden && found) l.source += ", overridden by the device's properties";
  return l;
}

OccupancyResult compute_occupancy(const ArchLimits& l, const OccupancyQuery& q) {
  OccupancyResult r;
  r.max_warps = l.max_warps_per_sm;
  auto fail = [&](const std::string& why) {
    r.launchable = false;
    if (r.launch_error.empty()) r.launch_error = why;
  };
  if (q.threads_per_block <= 0) {
    fail("a block needs at least one thread");
    return r;
  }
  if (q.threads_per_block > l.max_threads_per_block) {
    fail(std::to_string(q.threads_per_block) + " threads per block exceed the limit of " +
         std::to_string(l.max_threads_per_block));
  }
  r.warps_per_block = warps_for(l, q.threads_per_block);
  if (q.registers_per_thread > l.max_registers_per_thread) {
    fail(std::to_string(q.registers_per_thread) + " registers per thread exceed the limit of " +
         std::to_string(l.max_registers_per_thread));
  }
  r.registers_per_warp =
      q.registers_per_thread > 0
          ? static_cast<int>(round_up(int64_t{q.registers_per_thread} * l.warp_size, l.register_allocation_unit))
          : 0;
  r.blocks_by_registers = blocks_by_registers(l, q.registers_per_thread, r.warps_per_block);
  if (r.blocks_by_registers < 0) {
    fail(std::to_string(q.registers_per_thread) + " registers x " + std::to_string(q.threads_per_block) +
         " threads exceed the " + std::to_string(l.max_registers_per_block) +
         " registers a block may use (\"too many resources requested for launch\")");
    r.blocks_by_registers = 0;
  }
  const int64_t shared = q.static_shared_bytes + q.dynamic_shared_bytes;
  if (shared > l.shared_bytes_per_block_optin) {
    fail(std::to_string(shared) + " bytes of shared memory per block exceed the limit of " +
         std::to_string(l.shared_bytes_per_block_optin));
  }
  r.needs_shared_optin = shared > l.shared_bytes_per_block;
  r.shared_bytes_per_block = round_up(shared + l.reserved_shared_bytes_per_block, l.shared_allocation_unit);
  r.blocks_by_shared =
      r.shared_bytes_per_block > 0
          ? static_cast<int>(std::min<int64_t>(l.shared_bytes_per_sm / r.shared_bytes_per_block, l.max_blocks_per_sm))
          : l.max_blocks_per_sm;
  const int warps_uncapped = l.max_warps_per_sm / r.warps_per_block;
  r.blocks_by_warps = std::min(warps_uncapped, l.max_blocks_per_sm);
  r.blocks_by_registers = std::min(r.blocks_by_registers, l.max_blocks_per_sm);
  r.blocks_by_block_limit = l.max_blocks_per_sm;
  r.active_blocks = std::min({r.blocks_by_warps, r.blocks_by_registers, r.blocks_by_shared, r.blocks_by_block_limit});
  if (!r.launchable) r.active_blocks = 0;
  r.active_warps = r.active_blocks * r.warps_per_block;
  r.occupancy = r.max_warps > 0 ? static_cast<double>(r.active_warps) / r.max_warps : 0.0;
  if (r.launchable) {
    // Registers or shared memory limit only when the block size alone would
    // allow more blocks: at 768 threads, 2 blocks fill 48 of 64 warps whatever
    // the registers, and naming registers there would send the policy after
    // the wrong resource.
    const int structural = std::min(warps_uncapped, l.max_blocks_per_sm);
    if (r.blocks_by_registers == r.active_blocks && r.active_blocks < structural) r.limited_by.push_back("registers");
    if (r.blocks_by_shared == r.active_blocks && r.active_blocks < structural) r.limited_by.push_back("shared_memory");
    if (warps_uncapped == r.active_blocks) r.limited_by.push_back("warps");
    if (l.max_blocks_per_sm == r.active_blocks && l.max_blocks_per_sm <= warps_uncapped) {
      r.limited_by.push_back("blocks");
    }
  }
  return r;
}

int max_registers_for_blocks(const ArchLimits& l, int threads_per_block, int blocks) {
  const int warps = warps_for(l, threads_per_block);
  for (int regs = l.max_registers_per_thread; regs >= 1; --regs) {
    if (blocks_by_registers(l, regs, warps) >= blocks) return regs;
  }
  return 0;
}

int64_t max_shared_for_blocks(const ArchLimits& l, int blocks) {
  if (blocks <= 0) return l.shared_bytes_per_block_optin;
  const int64_t per_block = l.shared_bytes_per_sm / blocks / l.shared_allocation_unit * l.shared_allocation_unit;
  const int64_t usable = per_block - l.reserved_shared_bytes_per_block;
  if (usable < 0) return -1;
  return std::min(usable, l.shared_bytes_per_block_optin);
}

WaveInfo compute_waves(int64_t grid_blocks, int active_blocks_per_sm, int sm_count) {
  WaveInfo w;
  w.grid_blocks = grid_blocks;
  w.blocks_per_wave = int64_t{active_blocks_per_sm} * sm_count;
  if (w.blocks_per_wave <= 0 || grid_blocks <= 0) return w;
  w.waves = static_cast<double>(grid_blocks) / static_cast<double>(w.blocks_per_wave);
  w.full_waves = grid_blocks / w.blocks_per_wave;
  const int64_t rest = grid_blocks % w.blocks_per_wave;
  w.last_wave_fill = rest == 0 ? 1.0 : static_cast<double>(rest) / static_cast<double>(w.blocks_per_wave);
  return w;
}

json to_json(const ArchLimits& l) {
  return {{"arch", l.arch},
          {"source", l.source},
          {"max_threads_per_block", l.max_threads_per_block},
          {"max_threads_per_sm", l.max_threads_per_sm},
          {"max_warps_per_sm", l.max_warps_per_sm},
          {"max_blocks_per_sm", l.max_blocks_per_sm},
          {"registers_per_sm", l.registers_per_sm},
          {"max_registers_per_block", l.max_registers_per_block},
          {"max_registers_per_thread", l.max_registers_per_thread},
          {"register_allocation_unit", l.register_allocation_unit},
          {"shared_bytes_per_sm", l.shared_bytes_per_sm},
          {"shared_bytes_per_block", l.shared_bytes_per_block},
          {"shared_bytes_per_block_optin", l.shared_bytes_per_block_optin},
          {"reserved_shared_bytes_per_block", l.reserved_shared_bytes_per_block},
          {"shared_allocation_unit", l.shared_allocation_unit}};
}

json to_json(const OccupancyResult& r) {
  json j = {{"launchable", r.launchable},
            {"warps_per_block", r.warps_per_block},
            {"registers_per_warp", r.registers_per_warp},
            {"shared_bytes_per_block_allocated", r.shared_bytes_per_block},
            {"blocks_per_sm_by",
             {{"registers", r.blocks_by_registers},
              {"shared_memory", r.blocks_by_shared},
              {"warps", r.blocks_by_warps},
              {"blocks", r.blocks_by_block_limit}}},
            {"active_blocks_per_sm", r.active_blocks},
            {"active_warps_per_sm", r.active_warps},
            {"max_warps_per_sm", r.max_warps},
            {"occupancy", r.occupancy},
            {"limited_by", r.limited_by},
            {"needs_shared_optin", r.needs_shared_optin}};
  if (!r.launchable) j["launch_error"] = r.launch_error;
  return j;
}

json to_json(const WaveInfo& w) {
  return {{"grid_blocks", w.grid_blocks},
          {"blocks_per_wave", w.blocks_per_wave},
          {"waves", w.waves},
          {"full_waves", w.full_waves},
          {"last_wave_fill", w.last_wave_fill}};
}

}  // namespace kforge::env
