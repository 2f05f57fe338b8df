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

EvalSummary summarize(const env::StepResult& step) {
  const env::StepInfo& info = step.info;
  EvalSummary s;
  s.reward = step.reward;
  s.verdict = env::step_verdict(info);
  s.system_error = info.system_error();
  const Measurement& m = info.scored_measurement();
  s.speedup = m.speedup_eager ? fixed(*m.speedup_eager, 2) + "x" : "-";
  if (m.speedup_eager_lo && m.speedup_eager_hi) {
    s.speedup_interval = "[" + fixed(*m.speedup_eager_lo, 2) + ", " + fixed(*m.speedup_eager_hi, 2) + "]";
  }
  return s;
}

std::string format_report(const TaskSpec& task, const Solution& solution, const std::string& backend,
                          const env::StepResult& step) {
  const env::StepInfo& info = step.info;
  const Measurement& m = info.measurement;
  const json& data = step.observation.data;
  const EvalSummary sum = summarize(step);
  std::ostringstream o;
  auto row = [&o](const std::string& key, const std::string& value) {
    char head[16];
    std::snprintf(head, sizeof(head), "  %-10s ", key.c_str());
    o << head << value << "\n";
  };
  o << "kforge eval: " << task.id << "\n";
  const std::string& hash = info.solution_hash;
  row("solution", solution.origin + " (" + solution_mode_name(solution.mode) +
                      (hash.empty() ? "" : ", " + hash.substr(0, 12)) + ")");
  const std::string device = info.eval_report ? info.eval_report->device : "";
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
  if (info.eval_report && info.eval_report->timing) {
    const TimingSummary& timing = *info.eval_report->timing;
    row("candidate", timing_line(timing.candidate));
    row("eager", timing_line(timing.reference));
  }
  std::string sp = m.speedup_eager ? fixed(*m.speedup_eager, 2) + "x vs eager" : "-";
  if (m.speedup_eager && m.speedup_eager_lo && m.speedup_eager_hi) {
    // The interval and its exact coverage (sample_stats.h): "[1.71, 1.98] 96%".
    sp += " [" + fixed(*m.speedup_eager_lo, 2) + ", " + fixed(*m.speedup_eager_hi, 2) + "]" +
          (m.speedup_confidence ? " " + fixed(100.0 * *m.speedup_confidence, 0) + "%" : "");
  }
  sp += m.speedup_compile ? ", " + fixed(*m.speedup_compile, 2) + "x vs torch.compile"
                          : ", vs torch.compile: n/a (no baseline for this device)";
  if (m.timed) row("speedup", sp);
  for (const auto& v : m.violations) row("violation", v.check + ": " + v.detail);
  std::string rw = fixed(step.reward, 3);
  std::string parts;
  for (const auto& [name, value] : info.reward_components.components) {
    parts += (parts.empty() ? "" : ", ") + name + " " + general(value);
  }
  if (!parts.empty()) rw += " (" + parts + ")";
  row("reward", rw);
  o << "\nWhat the policy reads:\n" << indent(step.observation.text, "  | ");
  return o.str();
}

json report_json(const TaskSpec& task, const Solution& solution, const std::string& backend,
                 const env::StepResult& step) {
  const env::StepInfo& info = step.info;
  const EvalSummary s = summarize(step);
  return {{"task_id", task.id},
          {"solution", {{"origin", solution.origin}, {"mode", solution_mode_name(solution.mode)}}},
          {"backend", backend},
          {"verdict", s.verdict},
          {"reward", step.reward},
          {"reward_components", info.reward_components.to_json()},
          {"measurement", to_json(info.measurement)},
          {"result", to_json(step)}};
}

}  // namespace kforge::cli
