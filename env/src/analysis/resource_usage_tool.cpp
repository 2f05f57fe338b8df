// resource_usage: registers, shared memory, stack frame, spills and constant
// memory per kernel, from the compiler report or cuobjdump.
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
using internal::display_name;
using internal::find_plan_launch;
using internal::format_bytes;
using internal::format_percent;
using internal::kernel_parameter_schema;
using internal::obtain_resources;
using internal::plan_launches;
using internal::read_dims;
using internal::ResourceReport;
using internal::select_kernels;

struct Args {
  std::optional<std::string> kernel;
  std::optional<Dims> block;
};

Args parse_args(const json& args) {
  const Document doc = args_document("resource_usage", args);
  ObjectReader r = doc.root_object();
  Args a;
  if (auto f = r.optional("kernel")) a.kernel = f->as_string();
  if (auto f = r.optional("block_size")) a.block = read_dims(*f, 1024, 1024);
  r.finish();
  return a;
}

std::string describe(const KernelResources& k) {
  std::string s = display_name(k.name) + ": ";
  s += k.registers ? std::to_string(*k.registers) + " registers/thread" : "registers not reported";
  if (k.shared_bytes) s += ", static shared " + format_bytes(*k.shared_bytes);
  if (k.stack_bytes && *k.stack_bytes > 0) s += ", stack frame " + format_bytes(*k.stack_bytes);
  if (k.spill_bytes() == 0) {
    s += ", no spills";
  } else if (k.spill_store_bytes || k.spill_load_bytes) {
    s += ", spills " + std::to_string(k.spill_store_bytes.value_or(0)) + " B stored / " +
         std::to_string(k.spill_load_bytes.value_or(0)) + " B loaded";
  } else if (k.spill_total_bytes) {
    s += ", spills " + std::to_string(*k.spill_total_bytes) + " B";
  }
  if (k.local_bytes && *k.local_bytes > 0) s += ", local " + format_bytes(*k.local_bytes);
  if (k.constant_bytes) s += ", constant " + format_bytes(*k.constant_bytes);
  if (k.barriers) s += ", " + std::to_string(*k.barriers) + " barrier" + (*k.barriers == 1 ? "" : "s");
  if (k.entry && !*k.entry) s += " (device function)";
  return s;
}

void add_hints(const KernelResources& k, const std::optional<ArchLimits>& limits, const std::optional<Dims>& block,
               std::vector<std::string>& hints) {
  const std::string who = display_name(k.name, 60);
  const int64_t spills = k.spill_bytes().value_or(0);
  if (spills > 0) {
    std::string h = who + " spills registers to local memory (" + std::to_string(spills) +
                    " B of spill stores and loads per thread); every spill access is a memory access (L1/L2 at "
                    "best). Cut live registers: fewer accumulators or a smaller per-thread tile, no arrays indexed at "
                    "run time";
    if (k.registers && limits && *k.registers >= limits->max_registers_per_thread) {
      h += "; it already uses the " + std::to_string(limits->max_registers_per_thread) +
           "-register maximum, so the per-thread working set itself must shrink";
    } else {
      h += "; if __launch_bounds__ (minimum blocks) or -maxrregcount caps the registers, relax the cap";
    }
    hints.push_back(h + ".");
  } else if (k.stack_bytes && *k.stack_bytes > 0) {
    const bool spills_known = k.spill_store_bytes || k.spill_load_bytes || k.spill_total_bytes;
    hints.push_back(who + " has a " + std::to_string(*k.stack_bytes) + "-byte stack frame" +
                    (spills_known ? " without spills: a local array indexed with run-time values"
                                  : ": register spills or a local array indexed with run-time values") +
                    " (or a call that was not inlined, e.g. printf) lives in local memory. Index register arrays "
                    "only with compile-time constants (fully unrolled loops) or keep the array in shared memory; "
                    "sass_mix shows the LDL/STL instructions.");
  }
  if (!limits || !k.registers) return;
  const int regs = *k.registers;
  if (block) {
    const int threads = static_cast<int>(dims_product(*block));
    OccupancyQuery q;
    q.threads_per_block = threads;
    q.registers_per_thread = regs;
    q.static_shared_bytes = k.shared_bytes.value_or(0);
    const OccupancyResult occ = compute_occupancy(*limits, q);
    if (!occ.launchable) {
      hints.push_back(who + " cannot launch with " + std::to_string(threads) +
                      " threads per block: " + occ.launch_error + ".");
    } else if (occ.occupancy < 1.0 && !occ.limited_by.empty() && occ.limited_by.front() == "registers") {
      const int next = occ.active_blocks + 1;
      const int cap = max_registers_for_blocks(*limits, threads, next);
      std::string h = who + ": " + std::to_string(regs) + " registers/thread limit occupancy to " +
                      format_percent(occ.occupancy) + " at " + std::to_string(threads) + " threads per block (" +
                      std::to_string(occ.active_blocks) + " blocks/SM)";
      if (cap >= 16) {
        h += "; at most " + std::to_string(cap) + " registers would fit " + std::to_string(next) +
             " blocks: __launch_bounds__(" + std::to_string(threads) + ", " + std::to_string(next) +
             ") or -maxrregcount=" + std::to_string(cap) + " (then check for new spills)";
      }
      hints.push_back(h + ".");
    }
    return;
  }
  // Without a block size, say what the registers alone allow.
  const int per_warp = (regs * limits->warp_size + limits->register_allocation_unit - 1) /
                       limits->register_allocation_unit * limits->register_allocation_unit;
  const int max_warps = std::min(limits->max_warps_per_sm, (limits->registers_per_sm / limits->register_subpartitions) /
                                                               per_warp * limits->register_subpartitions);
  const double occupancy = static_cast<double>(max_warps) / limits->max_warps_per_sm;
  if (occupancy <= 0.5) {
    hints.push_back(who + ": " + std::to_string(regs) + " registers/thread allow at most " + std::to_string(max_warps) +
                    " of " + std::to_string(limits->max_warps_per_sm) + " warps per SM (" + format_percent(occupancy) +
                    " occupancy) whatever the block size. Fine for a kernel with much independent work per thread; "
                    "if it is latency-bound, cap registers with __launch_bounds__(threads, minBlocksPerSM). The "
                    "occupancy tool computes the exact limit for your block size.");
  }
}

class ResourceUsageTool : public AnalysisTool {
 public:
  std::string name() const override { return "resource_usage"; }

  std::string description() const override {
    return "Per-kernel resource usage of your compiled solution: registers per thread, static shared memory, "
           "stack frame, register spills (bytes stored/loaded to local memory), constant memory and barriers, "
           "from the compiler's report (or cuobjdump). Use it to find spills and register pressure that limit "
           "occupancy. Hints say what to change.";
  }

  json parameters() const override {
    return {{"type", "object"},
            {"properties",
             {{"kernel", kernel_parameter_schema()},
              {"block_size",
               {{"anyOf", json::array({{{"type", "integer"}, {"minimum", 1}, {"maximum", 1024}},
                                       {{"type", "array"},
                                        {"items", {{"type", "integer"}, {"minimum", 1}, {"maximum", 1024}}},
                                        {"minItems", 1},
                                        {"maxItems", 3}}})},
                {"description",
                 "Threads per block you launch with (an integer or [x, y, z]); adds whether registers limit "
                 "occupancy at that size."}}}}},
            {"additionalProperties", false}};
  }

  std::vector<SolutionMode> modes() const override {
    return {SolutionMode::kCuda, SolutionMode::kNvrtc, SolutionMode::kTorchExt};
  }

  void validate_args(const json& args) const override { parse_args(args); }

  AnalysisResult run(const AnalysisInput& input) const override {
    const Args args = parse_args(input.args);
    const ResourceReport report = obtain_resources(input);
    const auto selected = select_kernels(report.kernels, args.kernel);
    std::optional<ArchLimits> limits;
    try {
      limits = limits_for_device(input.device);
    } catch (const InputError&) {
      // Unknown arch: resource facts stay valid, only occupancy hints go.
    }
    const auto plan = plan_launches(input);
    AnalysisResult r;
    r.ok = true;
    json kernels = json::array();
    std::string body = "Resource usage (from the " + report.source + ", " + input.device.arch + "), " +
                       std::to_string(selected.size()) + " function" + (selected.size() == 1 ? "" : "s") + ":";
    for (const KernelResources* k : selected) {
      // The block size the kernel runs with: the argument, else a literal in the launch plan.
      std::optional<Dims> block = args.block;
      if (!block) {
        if (const auto* p = find_plan_launch(plan, k->name, report.kernels.size() == 1)) block = p->block;
      }
      json kj = to_json(*k);
      if (block) kj["block"] = dims_to_json(*block);
      kernels.push_back(std::move(kj));
      body += "\n- " + describe(*k);
      add_hints(*k, limits, block, r.hints);
    }
    r.facts = {{"source", report.source}, {"device_arch", input.device.arch}, {"kernels", kernels}};
    std::vector<std::string> notes = report.notes;
    if (report.source == "cuobjdump") {
      notes.push_back("cuobjdump reports no spill bytes; its stack frame counts spills and local arrays together");
    }
    for (const auto& n : notes) body += "\nNote: " + n;
    if (!notes.empty()) r.facts["notes"] = notes;
    if (r.hints.empty()) body += "\nNo spills, no stack frame and no register pressure worth acting on.";
    r.text = body;
    return r;
  }
};

}  // namespace

std::unique_ptr<AnalysisTool> make_resource_usage_tool() { return std::make_unique<ResourceUsageTool>(); }

}  // namespace kforge::env
