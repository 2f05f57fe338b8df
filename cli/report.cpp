#include "report.h"

#include <cstdio>
#include <sstream>

#include "kforge/core/timing_summary.h"

namespace kforge::cli {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string general(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

const json& at_or_null(const json& j, const char* key) {
  static const json kNull = nullptr;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string timing_line(const SampleStats& t) {
  if (t.samples == 0) return "-";
  return general(t.median_ms) + " ms (p25 " + general(t.p25_ms) + ", p75 " + general(t.p75_ms) +
         ", n=" + std::to_string(t.samples) + ")";
}

std::string indent(const std::string& text, const std::string& pad) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out += pad + line + "\n";
  return out;
}

}  // namespace

EvalSummary summarize(const StepResult& step) {
  EvalSummary s;
  s.reward = step.reward;
  const json& err = at_or_null(step.info, "error");
  if (err.is_object()) {
    s.verdict = "error: " + err.value("kind", std::string("unknown"));
    s.system_error = err.value("kind", std::string()) == "system";
  }
  // Truncated episodes are scored on their final evaluation.
  const json& fin = at_or_null(step.info, "final_evaluation");
  const json& m = fin.is_object() ? at_or_null(fin, "measurement") : at_or_null(step.info, "measurement");
  if (s.verdict.empty()) s.verdict = m.is_object() ? m.value("outcome", std::string("unknown")) : "unknown";
  const json& sp = at_or_null(m, "speedup_eager");
  s.speedup = sp.is_number() ? fixed(sp.get<double>(), 2) + "x" : "-";
  return s;
}

std::string format_report(const TaskSpec& task, const Solution& solution, const std::string& backend,
                          const StepResult& step) {
  const json& info = step.info;
  const json& m = at_or_null(info, "measurement");
  const json& report = at_or_null(info, "eval_report");
  const json& data = step.observation.data;
  const EvalSummary sum = summarize(step);
  std::ostringstream o;
  auto row = [&o](const std::string& key, const std::string& value) {
    char head[16];
    std::snprintf(head, sizeof(head), "  %-10s ", key.c_str());
    o << head << value << "\n";
  };
  o << "kforge eval: " << task.id << "\n";
  const std::string hash = info.value("solution_hash", std::string());
  row("solution", solution.origin + " (" + solution_mode_name(solution.mode) +
                      (hash.empty() ? "" : ", " + hash.substr(0, 12)) + ")");
  const std::string device = report.is_object() ? report.value("device", std::string()) : "";
  row("backend", backend + (device.empty() ? "" : " (" + device + ")"));
  const json& comp = at_or_null(data, "compile");
  if (comp.is_object()) {
    std::string c = comp.value("ok", false) ? "ok" : (comp.value("rejected", false) ? "REJECTED" : "FAILED");
    c += comp.value("cache_hit", false) ? ", cached" : ", " + general(comp.value("ms", 0.0)) + " ms";
    row("compile", c);
  }
  row("verdict", sum.verdict);
  const json& corr = at_or_null(data, "correctness");
  if (corr.is_object()) {
    std::string c =
        std::to_string(corr.value("passed", 0)) + "/" + std::to_string(corr.value("checks", 0)) + " checks passed";
    const json& worst = at_or_null(corr, "worst");
    if (worst.is_object() && worst.contains("max_abs_err") && worst["max_abs_err"].is_number()) {
      c += "; worst max abs err " + general(worst["max_abs_err"].get<double>());
    }
    row("checks", c);
  }
  if (report.is_object() && at_or_null(report, "timing").is_object()) {
    const TimingSummary timing = timing_summary_from_json(report["timing"], "<eval report timing>");
    row("candidate", timing_line(timing.candidate));
    row("eager", timing_line(timing.reference));
  }
  if (m.is_object()) {
    std::string sp = m.contains("speedup_eager") ? fixed(m["speedup_eager"].get<double>(), 2) + "x vs eager" : "-";
    sp += m.contains("speedup_compile") ? ", " + fixed(m["speedup_compile"].get<double>(), 2) + "x vs torch.compile"
                                        : ", vs torch.compile: n/a (no baseline for this device)";
    if (m.value("timed", false)) row("speedup", sp);
    const json& viol = at_or_null(m, "violations");
    for (const auto& v : viol)
      row("violation", v.value("check", std::string()) + ": " + v.value("detail", std::string()));
  }
  std::string rw = fixed(step.reward, 3);
  const json& comps = at_or_null(info, "reward_components");
  std::string parts;
  for (auto it = comps.begin(); comps.is_object() && it != comps.end(); ++it) {
    if (it.key() == "total") continue;
    parts += (parts.empty() ? "" : ", ") + it.key() + " " + general(it.value().get<double>());
  }
  if (!parts.empty()) rw += " (" + parts + ")";
  row("reward", rw);
  o << "\nWhat the policy reads:\n" << indent(step.observation.text, "  | ");
  return o.str();
}

json report_json(const TaskSpec& task, const Solution& solution, const std::string& backend, const StepResult& step) {
  const EvalSummary s = summarize(step);
  return {{"task_id", task.id},
          {"solution", {{"origin", solution.origin}, {"mode", solution_mode_name(solution.mode)}}},
          {"backend", backend},
          {"verdict", s.verdict},
          {"reward", step.reward},
          {"reward_components", step.info.value("reward_components", json::object())},
          {"measurement", step.info.value("measurement", json::object())},
          {"result", to_json(step)}};
}

}  // namespace kforge::cli
