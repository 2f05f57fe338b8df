// The replay report: a folder with index.html (the summary tables, failure
// causes, techniques, re-evaluation and the problems met while reading),
// data.json (the whole analysis, to_json(ReplayAnalysis)) and PNG plots drawn
// by scripts/replay_plots.py with matplotlib (Debian's python3-matplotlib).
// Without Python or matplotlib the HTML is still written, saying why it has
// no plots.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kforge/rollout/replay/replay.h"

namespace kforge::rollout::replay {

struct ReportOptions {
  // Interpreter for the plots: empty means $KFORGE_PYTHON, else the one the
  // build was configured with (KFORGE_PYTHON, Debian's /usr/bin/python3).
  std::filesystem::path python;
  // Empty: $KFORGE_SCRIPTS_DIR/replay_plots.py, else the source tree's
  // scripts/replay_plots.py.
  std::filesystem::path plot_script;
  double plot_timeout_s = 300.0;
};

struct ReportResult {
  std::filesystem::path html;      // <dir>/index.html
  std::filesystem::path data;      // <dir>/data.json
  std::vector<std::string> plots;  // PNG file names written in <dir>
  std::string plot_error;          // why there are no (or fewer) plots; "" when fine
};

// Creates `dir` if needed and (over)writes the report's files in it.
// SystemError if the folder or a file cannot be written.
ReportResult write_replay_report(const std::filesystem::path& dir, const ReplayAnalysis& analysis,
                                 const ReportOptions& options = {});

// Text with the five HTML-special characters escaped (everything in the
// report that came from a trajectory goes through it).
std::string html_escape(const std::string& text);

}  // namespace kforge::rollout::replay
