#include "kforge/env/observation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "kforge/core/trim.h"

namespace kforge::env {
namespace {

// What the policy reads must stay short: long compiler logs and program
// output crowd out the code it is working on.
constexpr size_t kMaxDiagnosticsChars = 3000;
constexpr size_t kMaxDiagnosticsLines = 40;
constexpr size_t kMaxOutputChars = 1200;
constexpr size_t kMaxFailuresShown = 3;

std::string num(double v, int digits = 4) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
  return buf;
}

std::string ms(double v) {
  char buf[48];
  if (v >= 100) {
    std::snprintf(buf, sizeof(buf), "%.1f ms", v);
  } else if (v >= 1) {
    std::snprintf(buf, sizeof(buf), "%.3f ms", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.4f ms", v);
  }
  return buf;
}

std::string times(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx", v);
  return buf;
}

// Keeps the head of a long text (compiler errors come first) and says what
// was cut, by lines and by characters.
std::string clip_head(const std::string& text, size_t max_chars, size_t max_lines) {
  size_t lines = 0, cut = std::string::npos;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i >= max_chars) {
      cut = i;
      break;
    }
    if (text[i] == '\n' && ++lines >= max_lines) {
      cut = i + 1;
      break;
    }
  }
  if (cut == std::string::npos || cut >= text.size()) return text;
  size_t rest = 0;
  for (size_t i = cut; i < text.size(); ++i) rest += text[i] == '\n';
  return text.substr(0, cut) + (text[cut - 1] == '\n' ? "" : "\n") + "[... " + std::to_string(rest + 1) +
         " more lines cut]";
}

// Program output matters at its end (the last message before a crash).
std::string clip_tail(const std::string& text, size_t max_chars) {
  if (text.size() <= max_chars) return text;
  return "[...]" + text.substr(text.size() - max_chars);
}

// Renders a small JSON value compactly for the policy: numbers with few
// digits, objects as key=value lists. The judge's records are open-ended, so
// unknown keys still show.
std::string compact(const json& v) {
  if (v.is_number_float()) return num(v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    std::string s;
    for (auto it = v.begin(); it != v.end(); ++it) s += (s.empty() ? "" : ", ") + it.key() + "=" + compact(it.value());
    return s;
  }
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + compact(v[i]);
    return s + "]";
  }
  return v.dump();
}

double number_or(const json& j, const char* key, double fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

bool passed(const json& check) { return check.is_object() && check.value("passed", false); }

std::string describe_failure(const json& f) {
  std::ostringstream s;
  s << "seed " << compact(f.value("seed", json("?")));
  // The judge numbers shape variants from 0 and calls -1 the base shape; the
  // prompt uses the same numbering.
  if (f.contains("variant") && f["variant"].is_number_integer()) {
    const int v = f["variant"].get<int>();
    s << (v < 0 ? ", base shape" : ", shape variant " + std::to_string(v));
  }
  if (f.contains("shapes")) s << " (" << compact(f["shapes"]) << ")";
  if (f.contains("output")) s << ", output " << compact(f["output"]);
  s << ":";
  if (f.contains("error")) s << " " << compact(f["error"]);
  if (f.contains("max_abs_err")) s << " max abs err " << compact(f["max_abs_err"]);
  // Relative error is 0 where the reference is 0; it only helps when positive.
  if (number_or(f, "max_rel_err", 0) > 0) s << ", max rel err " << compact(f["max_rel_err"]);
  if (f.contains("mismatches")) {
    s << ", " << compact(f["mismatches"]);
    if (f.contains("numel")) s << "/" << compact(f["numel"]);
    s << " elements outside tolerance";
  }
  if (f.value("nan_count", 0) > 0) s << ", " << compact(f["nan_count"]) << " NaN/Inf";
  if (f.contains("first_mismatch") && !f["first_mismatch"].is_null()) {
    s << "; first mismatch: " << compact(f["first_mismatch"]);
  }
  return s.str();
}

void add_compile(const StepRecord& r, std::ostringstream& text, json& data) {
  const CompileResult& c = *r.compile;
  data["compile"] = {{"ok", c.ok},         {"rejected", c.rejected},       {"cache_hit", c.cache_hit},
                     {"ms", c.compile_ms}, {"diagnostics", c.diagnostics}, {"resources", c.artifact.resources}};
  if (!c.ok) {
    text << (c.rejected ? "Rejected before compiling:\n" : "Compilation failed:\n")
         << clip_head(trim(c.diagnostics.empty() ? c.log : c.diagnostics), kMaxDiagnosticsChars, kMaxDiagnosticsLines)
         << "\n";
    return;
  }
  text << "Compiled" << (c.cache_hit ? " (cached)" : " in " + ms(c.compile_ms)) << ".";
  if (c.artifact.resources.is_object() && !c.artifact.resources.empty()) {
    text << " Resources:";
    for (auto it = c.artifact.resources.begin(); it != c.artifact.resources.end(); ++it) {
      const json& k = it.value();
      // The facts a kernel author acts on first; anything else the compiler
      // reported follows under its own name.
      static const std::vector<std::pair<std::string, std::string>> kKnown = {{"registers", " registers"},
                                                                              {"shared_bytes", " B shared"},
                                                                              {"stack_bytes", " B stack"},
                                                                              {"spill_store_bytes", " B spill stores"},
                                                                              {"spill_load_bytes", " B spill loads"},
                                                                              {"barriers", " barriers"}};
      std::vector<std::string> parts;
      for (const auto& [key, unit] : kKnown) {
        if (k.contains(key)) parts.push_back(compact(k[key]) + unit);
      }
      for (auto kv = k.begin(); k.is_object() && kv != k.end(); ++kv) {
        const bool known =
            std::any_of(kKnown.begin(), kKnown.end(), [&](const auto& p) { return p.first == kv.key(); });
        if (!known && kv.key() != "mangled" && kv.key() != "constant_bytes") {
          parts.push_back(kv.key() + " " + compact(kv.value()));
        }
      }
      text << "\n- " << it.key() << ":";
      for (size_t i = 0; i < parts.size(); ++i) text << (i ? ", " : " ") << parts[i];
    }
  }
  text << "\n";
}

void add_correctness(const EvalReport& e, std::ostringstream& text, json& data) {
  if (!e.verification.is_array() || e.verification.empty()) return;
  json failures = json::array();
  json worst = nullptr;
  int total = 0, ok = 0;
  for (const auto& check : e.verification) {
    if (!check.is_object()) continue;
    ++total;
    if (passed(check)) {
      ++ok;
    } else {
      if (failures.size() < kMaxFailuresShown) failures.push_back(check);
    }
    if (number_or(check, "max_abs_err", -1) > number_or(worst, "max_abs_err", -1)) worst = check;
  }
  json summary = {{"checks", total}, {"passed", ok}, {"failures", failures}};
  if (!worst.is_null()) summary["worst"] = worst;
  data["correctness"] = summary;
  if (e.outcome == Outcome::kCorrect) {
    text << "Correct: all " << total << " checks passed (seeds x shape variants)";
    if (!worst.is_null()) text << "; worst max abs err " << compact(worst["max_abs_err"]);
    text << ".\n";
  } else if (!failures.empty() && e.outcome == Outcome::kWrong) {
    // Crashes and timeouts also fail their check, but the failure section
    // explains those; a mismatch report would be empty.
    text << "Mismatch in " << (total - ok) << " of " << total << " checks. ";
    text << (failures.size() == 1 ? "Failure: " : "First failures:\n- ") << describe_failure(failures[0]);
    for (size_t i = 1; i < failures.size(); ++i) text << "\n- " << describe_failure(failures[i]);
    text << "\n";
  }
}

void add_timing(const StepRecord& r, std::ostringstream& text, json& data) {
  const EvalReport& e = *r.eval;
  if (!e.timing) return;
  const TimingSummary& timing = *e.timing;
  const SampleStats& cand = timing.candidate;
  json t = {{"candidate", to_json(cand)}, {"reference", to_json(timing.reference)}};
  const Measurement& m = r.measurement;
  if (m.speedup_eager) t["speedup_eager"] = *m.speedup_eager;
  if (m.speedup_compile) t["speedup_compile"] = *m.speedup_compile;
  if (m.compile_ms) t["compile_baseline_ms"] = *m.compile_ms;
  data["timing"] = t;
  const double med = cand.median_ms;
  if (!(med > 0) || cand.samples == 0) return;
  text << "Time: " << ms(med) << " median";
  if (cand.p25_ms > 0 && cand.p75_ms > 0) text << " (p25-p75 " << num(cand.p25_ms) << "-" << num(cand.p75_ms) << ")";
  text << ", " << cand.samples << " samples";
  const double ref_med = timing.reference.median_ms;
  if (ref_med > 0) text << "; eager PyTorch " << ms(ref_med);
  if (m.speedup_eager) text << " -> " << times(*m.speedup_eager) << (*m.speedup_eager >= 1 ? " faster" : " (slower)");
  if (m.speedup_compile && m.compile_ms) {
    text << "; torch.compile ~" << ms(*m.compile_ms) << " -> " << times(*m.speedup_compile);
  }
  text << ".\n";
}

void add_profile(const EvalReport& e, std::ostringstream& text, json& data) {
  if (!e.profile) return;
  const ProfileSummary& p = *e.profile;
  data["profile"] = to_json(p);
  // The measured facts in one line (CUDA profiles, docs/cuda-backend.md), or
  // why the hardware counters could not be read.
  std::vector<std::string> facts;
  if (p.metrics) {
    const HardwareMetrics& m = *p.metrics;
    if (m.sm_throughput_pct) facts.push_back("SM throughput " + num(*m.sm_throughput_pct, 3) + "% of peak");
    if (m.memory_throughput_pct) {
      facts.push_back("memory throughput " + num(*m.memory_throughput_pct, 3) + "% of peak");
    }
    if (m.dram_bytes) facts.push_back("DRAM " + num(*m.dram_bytes / 1e6, 4) + " MB");
    if (m.achieved_occupancy_pct) facts.push_back("achieved occupancy " + num(*m.achieved_occupancy_pct, 3) + "%");
  }
  if (p.attribution.is_object() && p.attribution.contains("kernel_launches")) {
    facts.push_back(compact(p.attribution["kernel_launches"]) + " kernel launch(es), " +
                    num(100 * p.own_kernel_fraction.value_or(0.0), 3) + "% of device time in your kernels");
  }
  if (!facts.empty()) {
    text << "Profile:";
    for (size_t i = 0; i < facts.size(); ++i) text << (i ? ", " : " ") << facts[i];
    text << ".\n";
  }
  if (!p.metrics_unavailable.is_null()) {
    text << "Hardware counters unavailable: " << compact(p.metrics_unavailable) << "\n";
  }
  if (!p.hints.empty()) {
    data["hints"] = p.hints;
    text << "Hints:\n";
    for (const auto& h : p.hints) text << "- " << h << "\n";
  }
}

void add_failure(const EvalReport& e, std::ostringstream& text, json& data) {
  switch (e.outcome) {
    case Outcome::kCrash:
    case Outcome::kTimeout:
    case Outcome::kRuntimeError:
    case Outcome::kRejected: {
      static const std::map<Outcome, std::string> kLabel = {{Outcome::kCrash, "Crashed"},
                                                            {Outcome::kTimeout, "Timed out"},
                                                            {Outcome::kRuntimeError, "Runtime error"},
                                                            {Outcome::kRejected, "Rejected"}};
      json crash = {{"reason", e.summary}};
      // The judge's summary already names what happened ("crashed: SIGSEGV
      // in kf_forward (seed 0, shape 0)"); the label is the fallback.
      text << (e.summary.empty() ? kLabel.at(e.outcome) : e.summary) << "\n";
      const std::string out = trim(e.candidate_output);
      if (!out.empty()) {
        crash["output"] = clip_tail(out, kMaxOutputChars);
        text << "Program output (end):\n" << crash["output"].get<std::string>() << "\n";
      }
      data["crash"] = crash;
      break;
    }
    case Outcome::kWrong:
      if (!data.contains("correctness") || data["correctness"]["failures"].empty()) {
        text << "Wrong: " << (e.summary.empty() ? "the outputs do not match the reference" : e.summary) << "\n";
      }
      break;
    case Outcome::kNotRun:
      if (!e.summary.empty()) text << "Not evaluated: " << e.summary << "\n";
      break;
    default:
      break;
  }
}

void add_violations(const Measurement& m, std::ostringstream& text, json& data) {
  if (m.violations.empty()) return;
  json v = json::array();
  text << "Disqualified (no speed reward):\n";
  for (const auto& x : m.violations) {
    v.push_back({{"check", x.check}, {"detail", x.detail}});
    text << "- " << x.check << ": " << x.detail << "\n";
  }
  data["violations"] = v;
}

std::string header(const StepRecord& r) {
  std::string s = "[" + r.action;
  if (r.max_turns > 0) s += ", turn " + std::to_string(r.turn + 1) + "/" + std::to_string(r.max_turns);
  s += "]";
  if (!r.solution_hash.empty()) s += " solution " + r.solution_hash.substr(0, 8);
  return s;
}

}  // namespace

const std::string& step_error_kind_name(StepErrorKind kind) {
  static const std::vector<std::string> kNames = {"none", "invalid_action", "no_solution", "episode_finished",
                                                  "system"};
  return kNames.at(static_cast<size_t>(kind));
}

std::string verdict_line(const Measurement& m) {
  std::string s = outcome_name(m.outcome);
  if (m.outcome == Outcome::kNotRun && m.compiled) s = "compiled";
  if (m.speedup_eager) s += ", " + times(*m.speedup_eager) + " vs eager";
  if (m.speedup_compile) s += ", " + times(*m.speedup_compile) + " vs torch.compile";
  if (!m.violations.empty()) s += ", violation: " + m.violations.front().check;
  return s;
}

Observation step_observation(const StepRecord& r) {
  std::ostringstream text;
  json data = {{"type", "step"}, {"action", r.action}, {"turn", r.turn}};
  if (r.max_turns > 0) data["turns_left"] = std::max(0, r.max_turns - r.turn - 1);
  text << header(r) << "\n";
  if (!r.solution_hash.empty()) data["solution"] = {{"mode", r.solution_mode}, {"hash", r.solution_hash}};

  if (r.error != StepErrorKind::kNone) {
    data["error"] = {{"kind", step_error_kind_name(r.error)}, {"message", r.error_message}};
    switch (r.error) {
      case StepErrorKind::kInvalidAction:
        text << "Invalid tool call: " << r.error_message << "\n";
        break;
      case StepErrorKind::kNoSolution:
        text << "No solution yet: " << r.error_message << "\n";
        break;
      case StepErrorKind::kEpisodeFinished:
        text << "The episode has already finished: " << r.error_message << "\n";
        break;
      case StepErrorKind::kSystem:
        text << "The environment failed on this step (not your fault; it did not count as a turn): " << r.error_message
             << "\n";
        break;
      case StepErrorKind::kNone:
        break;
    }
  }
  if (r.compile) add_compile(r, text, data);
  if (r.eval) {
    const EvalReport& e = *r.eval;
    data["outcome"] = outcome_name(e.outcome);
    data["summary"] = e.summary;
    add_correctness(e, text, data);
    // A system failure was already explained above.
    if (!(r.error == StepErrorKind::kSystem && e.outcome == Outcome::kNotRun)) add_failure(e, text, data);
    add_timing(r, text, data);
    add_profile(e, text, data);
  } else {
    data["outcome"] = outcome_name(r.measurement.outcome);
  }
  add_violations(r.measurement, text, data);
  if (!r.analysis_tool.empty()) {
    data["analysis"] = {{"tool", r.analysis_tool}, {"result", r.analysis}};
    const std::string body = r.analysis.is_object() ? r.analysis.value("text", std::string()) : "";
    text << (body.empty() ? compact(r.analysis) : trim(body)) << "\n";
  }
  data["episode"] = {{"terminated", r.terminated}, {"truncated", r.truncated}};
  if (r.truncated) data["episode"]["reason"] = r.truncation_reason;
  if (r.terminated) {
    text << "Submitted: " << verdict_line(r.measurement) << ". The episode is over.\n";
  } else if (r.truncated) {
    text << "The episode is over: "
         << (r.truncation_reason == "time_budget" ? "the time budget is used up"
             : r.truncation_reason == "max_turns" ? "no turns left"
                                                  : "the trainer ended it (" + r.truncation_reason + ")")
         << ".\n";
  } else if (r.max_turns > 0 && r.error != StepErrorKind::kEpisodeFinished) {
    const int left = std::max(0, r.max_turns - r.turn - (r.error == StepErrorKind::kSystem ? 0 : 1));
    text << left << (left == 1 ? " turn" : " turns") << " left.\n";
  }
  Observation obs;
  obs.text = text.str();
  obs.data = std::move(data);
  return obs;
}

std::string truncation_note(const StepRecord& final_eval, bool auto_submitted) {
  if (!auto_submitted) return "Nothing was submitted, so the episode counts as failed.\n";
  return "Your most recent solution" +
         (final_eval.solution_hash.empty() ? std::string() : " (" + final_eval.solution_hash.substr(0, 8) + ")") +
         " was evaluated as your submission: " + verdict_line(final_eval.measurement) + ".\n";
}

}  // namespace kforge::env
