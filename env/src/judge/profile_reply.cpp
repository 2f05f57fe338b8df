#include "judge/profile_reply.h"

#include <cstdint>

#include "judge/json_fields.h"

namespace kforge::judge {
namespace {

using json = nlohmann::json;

// CUDA's launch limits: block dimensions up to 1024 x 1024 x 64, grid up to
// 2^31-1 x 65535 x 65535. Attribution multiplies them, so larger values
// (which no launch can have) would overflow there.
constexpr uint64_t kMaxBlock[3] = {1024, 1024, 64};
constexpr uint64_t kMaxGrid[3] = {2147483647, 65535, 65535};

std::string dims_problem(const json& record, const char* key, const uint64_t (&limits)[3], const std::string& where) {
  const json& dims = record[key];
  if (dims.size() != 3) return where + ": field '" + key + "' has " + std::to_string(dims.size()) + " entries, not 3";
  for (size_t i = 0; i < 3; ++i) {
    if (!has_kind(dims[i], FieldKind::kUnsigned) || dims[i].get<uint64_t>() > limits[i]) {
      return where + ": " + key + "[" + std::to_string(i) + "] is not an integer in 0.." + std::to_string(limits[i]);
    }
  }
  return "";
}

std::string record_problem(const json& record, const std::string& where) {
  std::string p = check_fields(record,
                               {{"kind", FieldKind::kString, true},
                                {"stream", FieldKind::kUnsigned, true},
                                {"start_ns", FieldKind::kUnsigned, true},
                                {"end_ns", FieldKind::kUnsigned, true},
                                {"name", FieldKind::kString},
                                {"grid", FieldKind::kArray},
                                {"block", FieldKind::kArray},
                                {"registers", FieldKind::kUnsigned},
                                {"static_shared_bytes", FieldKind::kUnsigned},
                                {"dynamic_shared_bytes", FieldKind::kUnsigned},
                                {"bytes", FieldKind::kUnsigned}},
                               where);
  if (!p.empty()) return p;
  for (const char* key : {"registers", "static_shared_bytes", "dynamic_shared_bytes"}) {
    if (record.contains(key) && record[key].get<uint64_t>() > INT32_MAX) {
      return where + ": field '" + key + "' is out of range";
    }
  }
  if (record.contains("grid")) {
    if (p = dims_problem(record, "grid", kMaxGrid, where); !p.empty()) return p;
  }
  if (record.contains("block")) {
    if (p = dims_problem(record, "block", kMaxBlock, where); !p.empty()) return p;
  }
  return "";
}

std::string activity_problem(const json& activity) {
  if (activity.is_object() && activity.contains("error")) {
    return check_fields(activity, {{"error", FieldKind::kString}}, "activity");
  }
  std::string p = check_fields(activity,
                               {{"rc", FieldKind::kInteger},
                                {"stream", FieldKind::kUnsigned, true},
                                {"call_start_ns", FieldKind::kUnsigned},
                                {"synchronized_ns", FieldKind::kUnsigned, true},
                                {"device_ns", FieldKind::kUnsigned},
                                {"records", FieldKind::kArray, true},
                                {"dropped", FieldKind::kUnsigned}},
                               "activity");
  if (!p.empty()) return p;
  const json& records = activity["records"];
  for (size_t i = 0; i < records.size(); ++i) {
    if (p = record_problem(records[i], "activity.records[" + std::to_string(i) + "]"); !p.empty()) return p;
  }
  return "";
}

std::string metrics_problem(const json& metrics) {
  std::string p = check_fields(
      metrics,
      {{"values", FieldKind::kObject, true}, {"passes", FieldKind::kUnsigned}, {"unsupported", FieldKind::kArray}},
      "metrics");
  if (!p.empty()) return p;
  // A counter CUPTI could not evaluate arrives as null.
  for (const auto& [name, value] : metrics["values"].items()) {
    if (!value.is_number() && !value.is_null()) return "metrics.values: '" + name + "' is not a number";
  }
  for (const auto& name : metrics.value("unsupported", json::array())) {
    if (!name.is_string()) return "metrics.unsupported: an entry is not a string";
  }
  return "";
}

}  // namespace

std::string profile_reply_problem(const json& profile) {
  std::string p = check_fields(profile, {{"phase_ms", FieldKind::kObject},
                                         {"activity", FieldKind::kObject},
                                         {"activity_unavailable", FieldKind::kString},
                                         {"metrics", FieldKind::kObject},
                                         {"metrics_unavailable", FieldKind::kString},
                                         {"libraries_loaded", FieldKind::kArray}});
  if (!p.empty()) return p;
  if (profile.contains("phase_ms")) {
    for (const auto& [part, ms] : profile["phase_ms"].items()) {
      if (!ms.is_number()) return "phase_ms: '" + part + "' is not a number";
    }
  }
  if (profile.contains("activity")) {
    if (p = activity_problem(profile["activity"]); !p.empty()) return p;
  }
  if (profile.contains("metrics")) {
    if (p = metrics_problem(profile["metrics"]); !p.empty()) return p;
  }
  if (profile.contains("libraries_loaded")) {
    for (const auto& name : profile["libraries_loaded"]) {
      if (!name.is_string()) return "libraries_loaded: an entry is not a string";
    }
  }
  return "";
}

}  // namespace kforge::judge
