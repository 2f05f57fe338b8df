// JSON forms of the reference request and report (reference_probe.h), as
// they travel between the Executor and the judge.
#include "kforge/core/error.h"
#include "kforge/env/reference_probe.h"

namespace kforge::env {

const std::string& reference_status_name(ReferenceStatus status) {
  static const std::string kOk = "ok", kInvalid = "invalid", kError = "error";
  switch (status) {
    case ReferenceStatus::kOk:
      return kOk;
    case ReferenceStatus::kInvalid:
      return kInvalid;
    default:
      return kError;
  }
}

json to_json(const ReferenceRequest& r) {
  return {{"task", to_json(r.task)}, {"check", r.check}, {"time", r.time}, {"options", to_json(r.options)}};
}

ReferenceRequest reference_request_from_json(const json& j) {
  Document doc = Document::from_value(j, "<reference request>");
  ObjectReader r = doc.root_object();
  ReferenceRequest req;
  req.task = parse_task(Document::from_value(r.required("task").value(), "<reference request task>"));
  if (auto f = r.optional("check")) req.check = f->as_bool();
  if (auto f = r.optional("time")) req.time = f->as_bool();
  if (auto f = r.optional("options")) req.options = parse_eval_options(*f);
  r.finish();
  return req;
}

json to_json(const ReferenceReport& r) {
  return {{"status", reference_status_name(r.status)},      {"problem", r.problem}, {"nodes", r.nodes},
          {"timing", r.timing ? *r.timing : json(nullptr)}, {"device", r.device},   {"phase_ms", r.phase_ms}};
}

ReferenceReport reference_report_from_json(const json& j) {
  ReferenceReport r;
  const std::string status = j.at("status").get<std::string>();
  if (status == "ok") {
    r.status = ReferenceStatus::kOk;
  } else if (status == "invalid") {
    r.status = ReferenceStatus::kInvalid;
  } else if (status == "error") {
    r.status = ReferenceStatus::kError;
  } else {
    throw InputError("unknown reference status '" + status + "' (expected ok, invalid or error)");
  }
  r.problem = j.value("problem", "");
  r.nodes = j.value("nodes", json::array());
  if (j.contains("timing") && !j["timing"].is_null()) r.timing = j["timing"];
  r.device = j.value("device", "");
  r.phase_ms = j.value("phase_ms", json::object());
  return r;
}

}  // namespace kforge::env
