#include "kforge/rollout/replay/replay_report.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "kforge/core/error.h"
#include "kforge/core/process.h"
#include "kforge/core/remove_tree.h"

namespace kforge::rollout::replay {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw SystemError("replay: cannot write " + path.string());
}

fs::path default_python(const ReportOptions& o) {
  if (!o.python.empty()) return o.python;
  if (const char* v = std::getenv("KFORGE_PYTHON"); v != nullptr && *v != '\0') return v;
  return KFORGE_PYTHON;
}

fs::path default_script(const ReportOptions& o) {
  if (!o.plot_script.empty()) return o.plot_script;
  if (const char* v = std::getenv("KFORGE_SCRIPTS_DIR"); v != nullptr && *v != '\0') {
    return fs::path(v) / "replay_plots.py";
  }
  return fs::path(KFORGE_SCRIPTS_DIR) / "replay_plots.py";
}

// Runs the plot script; the PNGs it wrote, or why none.
std::vector<std::pair<std::string, std::string>> draw_plots(const fs::path& dir, const fs::path& data,
                                                            const ReportOptions& options, std::string* error) {
  const fs::path python = default_python(options);
  const fs::path script = default_script(options);
  std::error_code ec;
  if (!fs::exists(script, ec)) {
    *error = "the plot script " + script.string() + " is missing (set KFORGE_SCRIPTS_DIR)";
    return {};
  }
  fs::remove(dir / "plots.json", ec);
  ProcessOptions po;
  po.timeout_s = options.plot_timeout_s;
  po.env["MPLCONFIGDIR"] = (dir / ".matplotlib").string();  // a writable cache, wherever HOME is
  ProcessResult r;
  try {
    r = run_process({python.string(), script.string(), data.string(), dir.string()}, po);
  } catch (const SystemError& e) {
    *error = std::string("could not run ") + python.string() + ": " + e.what();
    return {};
  }
  kforge::remove_tree(dir / ".matplotlib");
  if (!r.ok()) {
    *error = r.timed_out
                 ? "the plot script did not finish within " + std::to_string(static_cast<int>(po.timeout_s)) + " s"
                 : "the plot script failed (exit " + std::to_string(r.exit_code) + "): " + last_lines(r.output, 3);
    return {};
  }
  std::vector<std::pair<std::string, std::string>> plots;
  try {
    const json manifest = json::parse(read_text_file(dir / "plots.json"));
    for (const auto& p : manifest) {
      const std::string file = p.value("file", std::string());
      // Only plain names in the report folder.
      if (file.empty() || file.find('/') != std::string::npos || !fs::exists(dir / file, ec)) continue;
      plots.emplace_back(file, p.value("title", file));
    }
  } catch (const std::exception& e) {
    *error = std::string("the plot script wrote no usable plots.json: ") + e.what();
  }
  fs::remove(dir / "plots.json", ec);  // read; the HTML lists the plots
  return plots;
}

// Per-solution and per-submit tables list this many rows; data.json has all.
constexpr size_t kMaxTableRows = 300;

std::string cell(const std::string& s) { return "<td>" + html_escape(s) + "</td>"; }

void more_rows_note(std::ostringstream& h, size_t total) {
  if (total > kMaxTableRows) {
    h << "<p>" << kMaxTableRows << " of " << total << " rows shown; data.json has all of them.</p>\n";
  }
}

std::string percent(double f) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%.0f%%", 100.0 * f);
  return buf;
}

std::string dist(const Distribution& d, const std::string& suffix = "") {
  if (d.n == 0) return "-";
  return format_number(d.median) + suffix + " [" + format_number(d.p10) + ", " + format_number(d.p90) + "]";
}

std::string causes(const std::map<std::string, size_t>& m) {
  std::vector<std::pair<std::string, size_t>> v(m.begin(), m.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string s;
  for (const auto& [k, n] : v) s += (s.empty() ? "" : ", ") + k + " x" + std::to_string(n);
  return s.empty() ? "-" : s;
}

void group_table(std::ostringstream& h, const std::string& title, const std::vector<GroupSummary>& groups) {
  h << "<table><tr><th>" << html_escape(title)
    << "</th><th>episodes</th><th>turns used (mean / max)</th><th>success</th><th>reward p50 [p10, p90]</th>"
       "<th>speedup p50 [p10, p90]</th><th>failure causes</th></tr>\n";
  for (const auto& g : groups) {
    h << "<tr>" << cell(g.key) << cell(std::to_string(g.episodes))
      << cell(format_number(g.turns_used.mean) + " / " + format_number(g.turns_used.max))
      << cell(percent(g.success_rate())) << cell(dist(g.reward)) << cell(dist(g.speedup, "x"))
      << cell(causes(g.failure_causes)) << "</tr>\n";
  }
  h << "</table>\n";
}

// The page's head and the overview paragraph of the whole set.
void overview_section(std::ostringstream& h, const ReplayAnalysis& a) {
  const GroupSummary& o = a.summary.overall;
  h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>KernelForge replay</title>\n<style>"
       "body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
       "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:90%}th{background:#f0f0f0}"
       "img{max-width:100%;margin:1em 0}.note{color:#a33}</style></head><body>\n";
  h << "<h1>KernelForge replay</h1>\n<p>" << o.episodes << " episodes from " << a.recorded.files << " file(s), "
    << a.summary.by_task.size() << " task(s), " << a.summary.by_policy_version.size() << " policy version(s). Success "
    << percent(o.success_rate()) << "; reward p50 [p10, p90] " << dist(o.reward) << "; speedup of successful episodes "
    << dist(o.speedup, "x") << "; " << format_number(o.turns_used.mean) << " turns used on average.</p>\n";
}

// The lines and files that could not be read.
void read_problems_section(std::ostringstream& h, const ReplayAnalysis& a) {
  if (a.recorded.problems.empty()) return;
  h << "<p class=\"note\">" << a.recorded.problems.size() << " line(s) or file(s) could not be read:</p><ul>\n";
  for (size_t i = 0; i < a.recorded.problems.size() && i < kMaxTableRows; ++i) {
    const ReadProblem& p = a.recorded.problems[i];
    h << "<li>" << html_escape(p.file + (p.line ? ":" + std::to_string(p.line) : "") + ": " + p.message) << "</li>\n";
  }
  h << "</ul>\n";
  more_rows_note(h, a.recorded.problems.size());
}

void plots_section(std::ostringstream& h, const std::vector<std::pair<std::string, std::string>>& plots,
                   const std::string& plot_error) {
  if (!plot_error.empty()) h << "<p class=\"note\">Plots: " << html_escape(plot_error) << "</p>\n";
  for (const auto& [file, title] : plots) {
    h << "<h3>" << html_escape(title) << "</h3>\n<img src=\"" << html_escape(file) << "\" alt=\"" << html_escape(title)
      << "\">\n";
  }
}

// A solution's techniques with their evidence, and the SASS note.
std::string techniques_text(const SolutionTechniques& t) {
  std::string list;
  for (const auto& f : t.report.found) {
    std::string ev;
    for (const auto& e : f.evidence) ev += (ev.empty() ? "" : "; ") + e;
    list += (list.empty() ? "" : ", ") + f.name + " (" + ev + ")";
  }
  if (!t.report.sass_note.empty()) list += (list.empty() ? "" : " - ") + t.report.sass_note;
  return list;
}

// A table of the techniques over every final solution, then one row per
// solution with the evidence.
void techniques_section(std::ostringstream& h, const ReplayAnalysis& a) {
  if (a.technique_stats.empty()) return;
  h << "<h2>Optimization techniques</h2>\n<p>In the final solution of each episode, found from the source"
       " and, where the SASS could be read, from the instructions the compiler emitted.</p>\n"
       "<table><tr><th>technique</th><th>solutions</th><th>in successful episodes</th>"
       "<th>speedup p50 of those</th></tr>\n";
  for (const auto& s : a.technique_stats) {
    h << "<tr>" << cell(s.name) << cell(std::to_string(s.solutions)) << cell(std::to_string(s.successes))
      << cell(s.speedup.n ? format_number(s.speedup.median) + "x" : "-") << "</tr>\n";
  }
  h << "</table>\n<table><tr><th>trajectory</th><th>task</th><th>mode</th><th>verdict</th><th>techniques "
       "(evidence)</th></tr>\n";
  for (size_t i = 0; i < a.techniques.size() && i < kMaxTableRows; ++i) {
    const SolutionTechniques& t = a.techniques[i];
    const std::string list = techniques_text(t);
    h << "<tr>" << cell(t.trajectory_id) << cell(t.task_id) << cell(t.mode)
      << cell(t.success ? "correct" + (t.speedup ? ", " + format_number(*t.speedup) + "x" : std::string()) : "failed")
      << cell(list.empty() ? "-" : list) << "</tr>\n";
  }
  h << "</table>\n";
  more_rows_note(h, a.techniques.size());
}

void reevaluation_row(std::ostringstream& h, const ReevalRow& row) {
  std::string rewards, outcomes;
  for (double x : row.rewards) rewards += (rewards.empty() ? "" : " ") + format_number(x);
  for (size_t i = 0; i < row.outcomes.size(); ++i) {
    outcomes += (i ? ", " : "") + row.outcomes[i] +
                (row.speedups[i] ? " " + format_number(*row.speedups[i]) + "x" : std::string());
  }
  h << "<tr>" << cell(row.task_id) << cell(row.trajectory_id) << cell(std::to_string(row.turn))
    << cell(format_number(row.recorded_reward) + " " +
            (row.recorded_outcome.empty() ? "not_run" : row.recorded_outcome))
    << cell(rewards.empty() ? "-" : rewards) << cell(outcomes.empty() ? "-" : outcomes)
    << cell(reeval_verdict_name(row.verdict)) << cell(row.note) << "</tr>\n";
}

void reevaluation_section(std::ostringstream& h, const ReevalReport& r) {
  std::string verdicts;
  for (const auto& [v, n] : r.verdicts) verdicts += (verdicts.empty() ? "" : ", ") + v + " " + std::to_string(n);
  h << "<h2>Re-evaluation on this machine</h2>\n<p>" << r.rows.size() << " recorded submits, " << r.runs
    << " runs on the " << html_escape(r.backend) << " backend. Verdicts: " << html_escape(verdicts) << ".</p>\n"
    << "<table><tr><th>task</th><th>trajectory</th><th>turn</th><th>recorded</th><th>re-run rewards</th>"
       "<th>re-run outcomes</th><th>verdict</th><th>note</th></tr>\n";
  for (size_t n = 0; n < r.rows.size() && n < kMaxTableRows; ++n) reevaluation_row(h, r.rows[n]);
  h << "</table>\n";
  more_rows_note(h, r.rows.size());
}

void notes_section(std::ostringstream& h, const std::vector<std::string>& notes) {
  if (notes.empty()) return;
  h << "<h2>Notes</h2><ul>\n";
  for (const auto& n : notes) h << "<li>" << html_escape(n) << "</li>\n";
  h << "</ul>\n";
}

std::string render_html(const ReplayAnalysis& a, const std::vector<std::pair<std::string, std::string>>& plots,
                        const std::string& plot_error) {
  std::ostringstream h;
  overview_section(h, a);
  read_problems_section(h, a);
  h << "<h2>Per task</h2>\n";
  group_table(h, "task", a.summary.by_task);
  h << "<h2>Per policy version</h2>\n";
  group_table(h, "policy version", a.summary.by_policy_version);
  h << "<h2>Failure causes</h2>\n<p>" << html_escape(causes(a.summary.overall.failure_causes)) << "</p>\n";
  plots_section(h, plots, plot_error);
  techniques_section(h, a);
  if (a.reevaluation) reevaluation_section(h, *a.reevaluation);
  notes_section(h, a.notes);
  h << "<p>The whole analysis: <a href=\"data.json\">data.json</a>.</p>\n</body></html>\n";
  return h.str();
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

ReportResult write_replay_report(const fs::path& dir, const ReplayAnalysis& analysis, const ReportOptions& options) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) throw SystemError("replay: cannot create the report folder " + dir.string());
  ReportResult result;
  result.data = dir / "data.json";
  result.html = dir / "index.html";
  // Recorded text may hold broken UTF-8 (compiler output cut mid-character):
  // replaced rather than refused.
  write_file(result.data, to_json(analysis).dump(1, ' ', false, json::error_handler_t::replace));
  // Plots of an earlier report in the same folder must not linger.
  for (const char* old : {"reward_distribution.png", "speedup_distribution.png", "progress_over_turns.png",
                          "failure_causes.png", "turns_used.png", "techniques.png", "reevaluation.png"}) {
    fs::remove(dir / old, ec);
  }
  const auto plots = draw_plots(dir, result.data, options, &result.plot_error);
  for (const auto& p : plots) result.plots.push_back(p.first);
  write_file(result.html, render_html(analysis, plots, result.plot_error));
  return result;
}

}  // namespace kforge::rollout::replay
