#include "judge/kernel_attribution.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

#include "kforge/core/demangle.h"
#include "kforge/env/analysis.h"
#include "kforge/env/analysis/occupancy.h"

namespace kforge::judge {
namespace {

using json = nlohmann::json;

// Records are reported one per kernel name: the first few names in a violation
// are enough evidence.
constexpr size_t kMaxNamesInDetail = 3;

struct Aggregate {
  std::string mangled;
  bool own = false;
  int launches = 0;
  double total_ms = 0;
  std::set<std::string> streams;
  json first;  // the first launch's record (grid, block, resources)
};

std::string list_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < kMaxNamesInDetail; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > kMaxNamesInDetail) s += " and " + std::to_string(names.size() - kMaxNamesInDetail) + " more";
  return s;
}

std::string describe_record(const json& r) {
  const std::string kind = r.value("kind", "kernel");
  return kind == "kernel" ? "kernel " + demangle(r.value("name", "")) : kind;
}

// Occupancy and waves of a launch on this device, when its limits are known.
void add_occupancy(const json& record, const AttributionDevice& device, json* out, double* waves) {
  if (device.sm_count <= 0) return;
  try {
    env::DeviceProperties props;
    props.arch = device.arch;
    props.sm_count = device.sm_count;
    env::ArchLimits limits = env::limits_for_device(props);
    const auto& block = record.at("block");
    const auto& grid = record.at("grid");
    env::OccupancyQuery q;
    q.threads_per_block = block[0].get<int>() * block[1].get<int>() * block[2].get<int>();
    q.registers_per_thread = record.value("registers", 0);
    q.static_shared_bytes = record.value("static_shared_bytes", 0);
    q.dynamic_shared_bytes = record.value("dynamic_shared_bytes", 0);
    env::OccupancyResult occ = env::compute_occupancy(limits, q);
    if (!occ.launchable || occ.active_blocks <= 0) return;
    int64_t blocks = grid[0].get<int64_t>() * grid[1].get<int64_t>() * grid[2].get<int64_t>();
    env::WaveInfo w = env::compute_waves(blocks, occ.active_blocks, device.sm_count);
    (*out)["occupancy"] = occ.occupancy;
    (*out)["waves"] = w.waves;
    (*out)["last_wave_fill"] = w.last_wave_fill;
    *waves = w.waves;
  } catch (const std::exception&) {
    // An architecture the occupancy table does not know: no figures.
  }
}

}  // namespace

KernelAttribution attribute_kernels(const json& activity, const std::set<std::string>& own_kernels,
                                    const AttributionDevice& device) {
  KernelAttribution a;
  const uint64_t given = activity.value("stream", uint64_t{0});
  const uint64_t synchronized = activity.value("synchronized_ns", uint64_t{0});
  a.own_rule = own_kernels.empty() ? "kernels on the given stream (the compiler reported no kernel list)"
                                   : "kernels compiled from the candidate's source";
  std::map<std::string, Aggregate> by_name;
  std::vector<std::string> order, foreign, late;
  double latest_ms = 0;
  for (const auto& r : activity.value("records", json::array())) {
    const std::string kind = r.value("kind", "kernel");
    const uint64_t start = r.value("start_ns", uint64_t{0}), end = r.value("end_ns", uint64_t{0});
    const double ms = end > start ? static_cast<double>(end - start) / 1e6 : 0.0;
    const bool on_given = r.value("stream", uint64_t{0}) == given;
    a.busy_ms += ms;
    if (!on_given) foreign.push_back(describe_record(r) + " on stream " + std::to_string(r.value("stream", 0)));
    if (synchronized > 0 && end > synchronized) {
      late.push_back(describe_record(r));
      latest_ms = std::max(latest_ms, static_cast<double>(end - synchronized) / 1e6);
    }
    if (kind != "kernel") {
      ++a.other_activity;
      continue;
    }
    ++a.kernel_launches;
    a.kernel_ms += ms;
    const std::string name = r.value("name", "");
    auto [it, fresh] = by_name.try_emplace(name);
    Aggregate& g = it->second;
    if (fresh) {
      order.push_back(name);
      g.mangled = name;
      g.first = r;
      g.own = own_kernels.empty() ? on_given : own_kernels.count(name) > 0;
    }
    ++g.launches;
    g.total_ms += ms;
    g.streams.insert(on_given ? "given" : "other");
    if (g.own) a.own_kernel_ms += ms;
  }
  a.own_kernel_fraction = a.busy_ms > 0 ? a.own_kernel_ms / a.busy_ms : 0.0;

  // Longest first: what the policy should look at.
  std::stable_sort(order.begin(), order.end(), [&](const std::string& x, const std::string& y) {
    return by_name[x].total_ms > by_name[y].total_ms;
  });
  for (const auto& name : order) {
    const Aggregate& g = by_name[name];
    json k = {{"name", demangle(name)},
              {"mangled", g.mangled},
              {"own", g.own},
              {"launches", g.launches},
              {"total_ms", g.total_ms},
              {"streams", std::vector<std::string>(g.streams.begin(), g.streams.end())},
              {"grid", g.first.value("grid", json::array())},
              {"block", g.first.value("block", json::array())},
              {"registers", g.first.value("registers", 0)},
              {"shared_bytes", g.first.value("static_shared_bytes", 0) + g.first.value("dynamic_shared_bytes", 0)}};
    double waves = 0;
    add_occupancy(g.first, device, &k, &waves);
    if (g.own) a.max_waves = std::max(a.max_waves, waves);
    a.kernels.push_back(std::move(k));
  }

  if (!foreign.empty()) {
    a.violations.push_back({"foreign_stream", std::to_string(foreign.size()) +
                                                  " operations ran outside the stream passed to kf_forward (" +
                                                  list_names(foreign) + "): all work must go on that stream"});
  }
  if (!late.empty()) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.3f ms", latest_ms);
    a.violations.push_back({"work_after_return", std::to_string(late.size()) +
                                                     " operations were still running after kf_forward returned and "
                                                     "its stream was synchronized (" +
                                                     list_names(late) + "; up to " + buf + " later)"});
  }
  return a;
}

json KernelAttribution::to_json() const {
  json v = json::array();
  for (const auto& x : violations) v.push_back({{"check", x.check}, {"detail", x.detail}});
  return {{"kernels", kernels},
          {"kernel_launches", kernel_launches},
          {"copies_and_memsets", other_activity},
          {"kernel_ms", kernel_ms},
          {"own_kernel_ms", own_kernel_ms},
          {"busy_ms", busy_ms},
          {"own_kernel_fraction", own_kernel_fraction},
          {"own_rule", own_rule},
          {"violations", v}};
}

}  // namespace kforge::judge
