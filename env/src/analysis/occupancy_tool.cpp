// occupancy: theoretical occupancy per kernel for a block size and dynamic
// shared memory, the resource that limits it, and the waves a grid makes on
// the device.
#include <memory>
#include <optional>

#include "kforge/env/analysis.h"
#include "kforge/env/analysis/occupancy.h"
#include "resource_source.h"
#include "tool_util.h"

namespace kforge::env {
namespace {

using internal::args_document;
using internal::Dims;
using internal::dims_product;
using internal::dims_to_json;
using internal::dims_to_string;
using internal::display_name;
using internal::find_plan_launch;
using internal::format_bytes;
using internal::format_fixed;
using internal::format_percent;
using internal::kernel_parameter_schema;
using internal::obtain_resources;
using internal::plan_launches;
using internal::PlanLaunch;
using internal::read_dims;
using internal::select_kernels;

struct Args {
  std::optional<std::string> kernel;
  std::optional<Dims> block;
  std::optional<int64_t> dynamic_shared;
  std::optional<Dims> grid;
  std::optional<int> registers;
  std::optional<int64_t> static_shared;
};

Args parse_args(const json& args) {
  const Document doc = args_document("occupancy", args);
  ObjectReader r = doc.root_object();
  Args a;
  if (auto f = r.optional("kernel")) a.kernel = f->as_string();
  if (auto f = r.optional("block_size")) a.block = read_dims(*f, 1024, 1024);
  if (auto f = r.optional("dynamic_shared_bytes")) a.dynamic_shared = f->as_int_in(0, int64_t{1} << 30);
  if (auto f = r.optional("grid")) a.grid = read_dims(*f, (int64_t{1} << 31) - 1, int64_t{1} << 50);
  if (auto f = r.optional("registers")) a.registers = static_cast<int>(f->as_int_in(1, 255));
  if (auto f = r.optional("static_shared_bytes")) a.static_shared = f->as_int_in(0, int64_t{1} << 30);
  r.finish();
  return a;
}

json dims_schema(int64_t max_each, const std::string& description) {
  return {{"anyOf", json::array({{{"type", "integer"}, {"minimum", 1}, {"maximum", max_each}},
                                 {{"type", "array"},
                                  {"items", {{"type", "integer"}, {"minimum", 1}, {"maximum", max_each}}},
                                  {"minItems", 1},
                                  {"maxItems", 3}}})},
          {"description", description}};
}

std::string limiter_text(const std::string& limiter) {
  if (limiter == "shared_memory") return "shared memory";
  if (limiter == "blocks") return "the blocks-per-SM limit";
  return limiter;
}

struct KernelInput {
  std::string name;
  int registers = 0;
  int64_t static_shared = 0;
};

void add_hints(const KernelInput& k, const ArchLimits& limits, const OccupancyQuery& q, const OccupancyResult& occ,
               const std::optional<internal::Dims>& grid, const WaveInfo& waves, const AnalysisInput& input,
               std::vector<std::string>& hints) {
  const std::string who = display_name(k.name, 60);
  const int threads = q.threads_per_block;
  if (!occ.launchable) {
    hints.push_back(who + " cannot launch with this configuration: " + occ.launch_error + ".");
    return;
  }
  const auto mode = input.mode();
  if (occ.needs_shared_optin && mode && *mode != SolutionMode::kNvrtc) {
    hints.push_back(who + " uses " + std::to_string(q.static_shared_bytes + q.dynamic_shared_bytes) +
                    " B of shared memory per block (over 48 KB): call cudaFuncSetAttribute(kernel, "
                    "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) before the launch, or it fails.");
  }
  if (threads % limits.warp_size != 0) {
    hints.push_back("block size " + std::to_string(threads) + " is not a multiple of " +
                    std::to_string(limits.warp_size) + ": the last warp of every block runs with " +
                    std::to_string(limits.warp_size - threads % limits.warp_size) + " idle lanes.");
  }
  if (occ.occupancy < 1.0 && !occ.limited_by.empty()) {
    const std::string& limiter = occ.limited_by.front();
    const int next = occ.active_blocks + 1;
    const std::string now = format_percent(occ.occupancy) + " occupancy (" + std::to_string(occ.active_blocks) +
                            " blocks of " + std::to_string(threads) + " threads per SM)";
    if (limiter == "registers") {
      const int cap = max_registers_for_blocks(limits, threads, next);
      std::string h = "registers (" + std::to_string(k.registers) + "/thread) limit " + who + " to " + now;
      if (cap >= 16 && next * occ.warps_per_block <= limits.max_warps_per_sm) {
        h += "; at most " + std::to_string(cap) + " registers would fit " + std::to_string(next) + " blocks (" +
             format_percent(static_cast<double>(next * occ.warps_per_block) / limits.max_warps_per_sm) +
             "): cap with __launch_bounds__(" + std::to_string(threads) + ", " + std::to_string(next) +
             ") or -maxrregcount=" + std::to_string(cap) +
             " if the kernel is latency-bound, then check resource_usage for new spills";
      }
      hints.push_back(h + ".");
    } else if (limiter == "shared_memory") {
      const int64_t fit = max_shared_for_blocks(limits, next);
      std::string h = "shared memory (" + format_bytes(q.static_shared_bytes + q.dynamic_shared_bytes) +
                      " per block, plus " + std::to_string(limits.reserved_shared_bytes_per_block) +
                      " B the driver reserves) limits " + who + " to " + now;
      if (fit > 0 && next * occ.warps_per_block <= limits.max_warps_per_sm) {
        h += "; at most " + format_bytes(fit) + " per block would fit " + std::to_string(next) +
             " blocks: smaller tiles or fewer pipeline stages, unless the data reuse is worth the lower occupancy";
      }
      hints.push_back(h + ".");
    } else if (limiter == "warps") {
      hints.push_back("blocks of " + std::to_string(threads) + " threads (" + std::to_string(occ.warps_per_block) +
                      " warps) do not divide the SM's " + std::to_string(limits.max_warps_per_sm) + " warps: only " +
                      std::to_string(occ.active_warps) + " warps fit (" + format_percent(occ.occupancy) +
                      "). A block size that divides " + std::to_string(limits.max_threads_per_sm) +
                      " (128, 256, 512) fills the SM.");
    } else if (limiter == "blocks") {
      hints.push_back("blocks of " + std::to_string(threads) + " threads are too small: at most " +
                      std::to_string(limits.max_blocks_per_sm) + " blocks fit on an SM, so " + who + " reaches " +
                      format_percent(occ.occupancy) + " occupancy. Use at least " +
                      std::to_string(limits.max_threads_per_sm / limits.max_blocks_per_sm) + " threads per block.");
    }
  }
  if (!grid || waves.blocks_per_wave <= 0) return;
  const int sms = input.device.sm_count;
  if (waves.grid_blocks < sms) {
    hints.push_back("the grid has " + std::to_string(waves.grid_blocks) + " blocks for " + std::to_string(sms) +
                    " SMs: " + std::to_string(sms - waves.grid_blocks) +
                    " SMs get no work at all. Use more, smaller blocks (or split the reduction dimension, "
                    "e.g. split-K) so that every SM has blocks.");
  } else if (waves.waves < 1.0) {
    hints.push_back("the grid of " + std::to_string(waves.grid_blocks) + " blocks fills " +
                    format_percent(waves.waves) + " of one wave (" + std::to_string(waves.blocks_per_wave) +
                    " resident blocks on " + std::to_string(sms) +
                    " SMs): SMs run below their occupancy. Smaller blocks or more work items per launch help.");
  } else if (waves.full_waves < 4 && waves.last_wave_fill < 0.5) {
    hints.push_back("the grid makes " + format_fixed(waves.waves, 2) + " waves; the last one is " +
                    format_percent(waves.last_wave_fill) +
                    " full, so SMs idle through much of it. Size the grid as "
                    "a multiple of " +
                    std::to_string(waves.blocks_per_wave) + " blocks (resize tiles) or use a persistent grid of " +
                    std::to_string(waves.blocks_per_wave) + " blocks that loops over the work.");
  }
}

// The kernels to report on: the one the arguments describe, or those the
// resource report lists (filtered by name, then by the launch plan).
struct KernelSet {
  std::vector<KernelInput> kernels;
  std::string resource_source = "arguments";
  bool sole_kernel = true;
};

KernelSet kernels_to_report(const Args& args, const AnalysisInput& input, const std::vector<PlanLaunch>& plan,
                            std::vector<std::string>* notes) {
  KernelSet set;
  if (args.registers) {
    std::string name = args.kernel.value_or("");
    if (name.empty() && plan.size() == 1) name = plan[0].lowered_name.empty() ? plan[0].name : plan[0].lowered_name;
    set.kernels.push_back({name.empty() ? "kernel" : name, *args.registers, args.static_shared.value_or(0)});
    return set;
  }
  const auto report = obtain_resources(input);
  set.resource_source = report.source;
  notes->insert(notes->end(), report.notes.begin(), report.notes.end());
  set.sole_kernel = report.kernels.size() == 1;
  for (const KernelResources* k : select_kernels(report.kernels, args.kernel)) {
    if (k->entry && !*k->entry) continue;  // device functions are not launched
    // With a launch plan and no filter, the kernels the plan launches.
    if (!args.kernel && !plan.empty() && !find_plan_launch(plan, k->name, set.sole_kernel)) continue;
    if (!k->registers) {
      notes->push_back(display_name(k->name, 60) + ": registers not reported, skipped (pass registers)");
      continue;
    }
    set.kernels.push_back({k->name, *k->registers, args.static_shared.value_or(k->shared_bytes.value_or(0))});
  }
  if (set.kernels.empty()) throw InputError("no kernel with known register usage to compute occupancy for");
  return set;
}

struct LaunchConfig {
  Dims block;
  int64_t dynamic_shared = 0;
  std::optional<Dims> grid;
};

// Launch configuration: the arguments, else the plan's literals for this kernel.
LaunchConfig launch_config(const KernelInput& k, const Args& args, const PlanLaunch* p,
                           std::vector<std::string>* notes) {
  std::optional<Dims> block = args.block;
  if (!block && p) {
    block = p->block;
    if (!block && !p->block_text.empty()) {
      throw InputError("block_size is required: the launch plan's block for " + display_name(k.name, 60) + " (" +
                       p->block_text +
                       ") depends on the shapes; pass the threads per block, e.g. "
                       "{\"block_size\": 256}");
    }
  }
  if (!block) {
    throw InputError(
        "block_size is required: pass the threads per block your launch uses, e.g. "
        "{\"block_size\": 256} or {\"block_size\": [16, 16]}");
  }
  LaunchConfig lc;
  lc.block = *block;
  if (args.dynamic_shared) {
    lc.dynamic_shared = *args.dynamic_shared;
  } else if (p) {
    if (p->shared_bytes) {
      lc.dynamic_shared = *p->shared_bytes;
    } else {
      notes->push_back("the launch plan's shared memory for " + display_name(k.name, 60) + " (" + p->shared_text +
                       ") depends on the shapes; assumed 0 B (pass dynamic_shared_bytes)");
    }
  }
  lc.grid = args.grid;
  if (!lc.grid && p) lc.grid = p->grid;
  return lc;
}

std::string occupancy_text(const KernelInput& k, const LaunchConfig& lc, int threads, const OccupancyResult& occ) {
  std::string text = "\n- " + display_name(k.name) + ": block " +
                     (lc.block[1] == 1 && lc.block[2] == 1 ? std::string() : dims_to_string(lc.block) + " = ") +
                     std::to_string(threads) + " threads, " + std::to_string(k.registers) + " registers, shared " +
                     format_bytes(k.static_shared) + " static + " + format_bytes(lc.dynamic_shared) + " dynamic -> ";
  if (!occ.launchable) return text + "cannot launch: " + occ.launch_error;
  return text + std::to_string(occ.active_blocks) + " blocks/SM (" + std::to_string(occ.active_warps) + " of " +
         std::to_string(occ.max_warps) + " warps), occupancy " + format_percent(occ.occupancy) + ", " +
         (occ.occupancy >= 1.0 ? std::string("full")
                               : "limited by " + limiter_text(occ.limited_by.empty() ? "?" : occ.limited_by[0])) +
         " (blocks/SM by registers " + std::to_string(occ.blocks_by_registers) + ", shared memory " +
         std::to_string(occ.blocks_by_shared) + ", warps " + std::to_string(occ.blocks_by_warps) + ", limit " +
         std::to_string(occ.blocks_by_block_limit) + ")";
}

// One kernel: its occupancy and waves as a line of text, facts and hints.
void report_kernel(const KernelInput& k, const LaunchConfig& lc, const ArchLimits& limits, const AnalysisInput& input,
                   std::string* body, json* kernel_facts, std::vector<std::string>* hints) {
  const int threads = static_cast<int>(dims_product(lc.block));
  OccupancyQuery q;
  q.threads_per_block = threads;
  q.registers_per_thread = k.registers;
  q.static_shared_bytes = k.static_shared;
  q.dynamic_shared_bytes = lc.dynamic_shared;
  const OccupancyResult occ = compute_occupancy(limits, q);
  WaveInfo waves;
  json kf = to_json(occ);
  kf["name"] = k.name;
  kf["demangled"] = display_name(k.name, 1000);
  kf["registers"] = k.registers;
  kf["static_shared_bytes"] = k.static_shared;
  kf["dynamic_shared_bytes"] = lc.dynamic_shared;
  kf["block"] = dims_to_json(lc.block);
  kf["threads_per_block"] = threads;
  *body += occupancy_text(k, lc, threads, occ);
  if (lc.grid && occ.launchable) {
    waves = compute_waves(dims_product(*lc.grid), occ.active_blocks, input.device.sm_count);
    kf["grid"] = dims_to_json(*lc.grid);
    kf["waves"] = to_json(waves);
    *body += "\n  grid " + dims_to_string(*lc.grid) + " = " + std::to_string(waves.grid_blocks) +
             " blocks: " + format_fixed(waves.waves, 2) + " waves of " + std::to_string(waves.blocks_per_wave) +
             " blocks, last wave " + format_percent(waves.last_wave_fill) + " full";
  }
  kernel_facts->push_back(kf);
  add_hints(k, limits, q, occ, lc.grid, waves, input, *hints);
}

class OccupancyTool : public AnalysisTool {
 public:
  std::string name() const override { return "occupancy"; }

  std::string description() const override {
    return "Theoretical occupancy of each kernel for a block size and dynamic shared memory: resident blocks and "
           "warps per SM, occupancy %, the resource that limits it (registers, shared memory, warps or the "
           "blocks-per-SM limit) and what would lift it; with a grid, the number of waves on the device's SMs and "
           "how full the last wave is. Registers and static shared memory come from the compiled binary.";
  }

  json parameters() const override {
    return {{"type", "object"},
            {"properties",
             {{"kernel", kernel_parameter_schema()},
              {"block_size",
               dims_schema(1024,
                           "Threads per block you launch with (an integer or [x, y, z]). Required unless the nvrtc "
                           "launch plan gives a literal block.")},
              {"dynamic_shared_bytes",
               {{"type", "integer"},
                {"minimum", 0},
                {"description",
                 "Dynamic shared memory per block in bytes. Default: the launch plan's literal value, else 0."}}},
              {"grid", dims_schema((int64_t{1} << 31) - 1,
                                   "Blocks in the grid (an integer or [x, y, z]) for the task's problem size; adds the "
                                   "wave count. Default: the launch plan's literal grid, if any.")},
              {"registers",
               {{"type", "integer"},
                {"minimum", 1},
                {"maximum", 255},
                {"description",
                 "Registers per thread to assume instead of the compiled value (what-if, e.g. a "
                 "__launch_bounds__ cap)."}}},
              {"static_shared_bytes",
               {{"type", "integer"},
                {"minimum", 0},
                {"description", "Static shared memory per block to assume instead of the compiled value."}}}}},
            {"additionalProperties", false}};
  }

  std::vector<SolutionMode> modes() const override {
    return {SolutionMode::kCuda, SolutionMode::kNvrtc, SolutionMode::kTorchExt};
  }

  void validate_args(const json& args) const override { parse_args(args); }

  AnalysisResult run(const AnalysisInput& input) const override {
    const Args args = parse_args(input.args);
    const ArchLimits limits = limits_for_device(input.device);
    const std::vector<PlanLaunch> plan = plan_launches(input);
    std::vector<std::string> notes;
    const KernelSet set = kernels_to_report(args, input, plan, &notes);

    AnalysisResult r;
    r.ok = true;
    json kernel_facts = json::array();
    std::string body = "Occupancy on " + input.device.name + " (" + limits.arch + ": " +
                       std::to_string(limits.max_warps_per_sm) + " warps, " + std::to_string(limits.max_blocks_per_sm) +
                       " blocks, " + std::to_string(limits.registers_per_sm) + " registers, " +
                       format_bytes(limits.shared_bytes_per_sm) + " shared per SM; " +
                       std::to_string(input.device.sm_count) + " SMs):";
    for (const auto& k : set.kernels) {
      const LaunchConfig lc = launch_config(k, args, find_plan_launch(plan, k.name, set.sole_kernel), &notes);
      report_kernel(k, lc, limits, input, &body, &kernel_facts, &r.hints);
    }
    for (const auto& n : notes) body += "\nNote: " + n;
    r.facts = {{"device", to_json(input.device)},
               {"limits", to_json(limits)},
               {"resource_source", set.resource_source},
               {"kernels", kernel_facts}};
    if (!notes.empty()) r.facts["notes"] = notes;
    r.text = body;
    return r;
  }
};

}  // namespace

std::unique_ptr<AnalysisTool> make_occupancy_tool() { return std::make_unique<OccupancyTool>(); }

}  // namespace kforge::env
