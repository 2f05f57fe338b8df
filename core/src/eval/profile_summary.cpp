#include "kforge/core/profile_summary.h"

#include <cmath>

#include "summary_fields.h"

namespace kforge {
namespace {

using internal::optional_number;
using internal::optional_value;
using internal::put;

}  // namespace

json to_json(const HardwareMetrics& m) {
  json j = json::object();
  put(j, "sm_throughput_pct", m.sm_throughput_pct);
  put(j, "memory_throughput_pct", m.memory_throughput_pct);
  put(j, "dram_throughput_pct", m.dram_throughput_pct);
  put(j, "dram_bytes", m.dram_bytes);
  put(j, "achieved_occupancy_pct", m.achieved_occupancy_pct);
  put(j, "range_ms", m.range_ms);
  put(j, "sm_clock_mhz", m.sm_clock_mhz);
  put(j, "busy_ms", m.busy_ms);
  put(j, "waves_per_sm", m.waves_per_sm);
  j["pct_basis"] = m.pct_basis;
  if (!m.over_range.is_null()) j["over_range"] = m.over_range;
  j["passes"] = m.passes;
  j["unsupported"] = m.unsupported;
  return j;
}

json to_json(const ProfileSummary& p) {
  json j = {{"schema_version", p.schema_version}, {"hints", p.hints}};
  put(j, "own_kernel_fraction", p.own_kernel_fraction);
  put(j, "traced_call_ms", p.traced_call_ms);
  if (!p.attribution.is_null()) j["attribution"] = p.attribution;
  if (p.metrics) j["metrics"] = to_json(*p.metrics);
  if (!p.roofline.is_null()) j["roofline"] = p.roofline;
  if (!p.attribution_unavailable.empty()) j["attribution_unavailable"] = p.attribution_unavailable;
  if (!p.metrics_unavailable.is_null()) j["metrics_unavailable"] = p.metrics_unavailable;
  if (!p.roofline_unavailable.empty()) j["roofline_unavailable"] = p.roofline_unavailable;
  if (!p.profiler_output.empty()) j["profiler_output"] = p.profiler_output;
  if (!p.traced_in.empty()) j["traced_in"] = p.traced_in;
  if (!p.timing_runner_trace_failed.empty()) j["timing_runner_trace_failed"] = p.timing_runner_trace_failed;
  if (!p.libraries_loaded_while_profiling.is_null()) {
    j["libraries_loaded_while_profiling"] = p.libraries_loaded_while_profiling;
  }
  return j;
}

HardwareMetrics hardware_metrics_from_field(const Field& field) {
  ObjectReader r = field.as_object();
  HardwareMetrics m;
  m.sm_throughput_pct = optional_number(r, "sm_throughput_pct");
  m.memory_throughput_pct = optional_number(r, "memory_throughput_pct");
  m.dram_throughput_pct = optional_number(r, "dram_throughput_pct");
  m.dram_bytes = optional_number(r, "dram_bytes");
  m.achieved_occupancy_pct = optional_number(r, "achieved_occupancy_pct");
  m.range_ms = optional_number(r, "range_ms");
  m.sm_clock_mhz = optional_number(r, "sm_clock_mhz");
  m.busy_ms = optional_number(r, "busy_ms");
  m.waves_per_sm = optional_number(r, "waves_per_sm");
  if (auto f = r.optional("pct_basis")) m.pct_basis = f->as_string();
  m.over_range = optional_value(r, "over_range");
  if (auto f = r.optional("passes")) m.passes = static_cast<int>(f->as_int_in(0, INT32_MAX));
  if (auto f = r.optional("unsupported")) m.unsupported = f->as_string_list();
  r.finish();
  return m;
}

HardwareMetrics hardware_metrics_from_json(const json& j, const std::string& source) {
  const Document doc = Document::from_value(j, source);
  return hardware_metrics_from_field(doc.root_object().self());
}

ProfileSummary profile_summary_from_field(const Field& field) {
  ObjectReader r = field.as_object();
  ProfileSummary p;
  Field version = r.required("schema_version");
  p.schema_version = static_cast<int>(version.as_int());
  if (p.schema_version != kProfileSummarySchemaVersion) {
    version.fail("profile schema version " + std::to_string(kProfileSummarySchemaVersion) +
                 " (this build reads only that version)");
  }
  p.own_kernel_fraction = optional_number(r, "own_kernel_fraction");
  p.traced_call_ms = optional_number(r, "traced_call_ms");
  p.attribution = optional_value(r, "attribution");
  if (auto f = r.optional("metrics")) p.metrics = hardware_metrics_from_field(*f);
  p.roofline = optional_value(r, "roofline");
  if (auto f = r.optional("hints")) p.hints = f->as_string_list();
  if (auto f = r.optional("attribution_unavailable")) {
    // The profiler runner's own error record may be an object; kept as text.
    p.attribution_unavailable = f->value().is_string() ? f->as_string() : f->value().dump();
  }
  p.metrics_unavailable = optional_value(r, "metrics_unavailable");
  if (auto f = r.optional("roofline_unavailable")) p.roofline_unavailable = f->as_string();
  if (auto f = r.optional("profiler_output")) p.profiler_output = f->as_string();
  if (auto f = r.optional("traced_in")) p.traced_in = f->as_string();
  if (auto f = r.optional("timing_runner_trace_failed")) p.timing_runner_trace_failed = f->as_string();
  p.libraries_loaded_while_profiling = optional_value(r, "libraries_loaded_while_profiling");
  r.finish();
  return p;
}

ProfileSummary profile_summary_from_json(const json& j, const std::string& source) {
  const Document doc = Document::from_value(j, source);
  return profile_summary_from_field(doc.root_object().self());
}

}  // namespace kforge
