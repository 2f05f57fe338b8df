#include "kforge/env/compile/diagnostics.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <sstream>
#include <tuple>

#include "kforge/core/trim.h"

namespace kforge::env {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

int to_int(const std::string& s) {
  try {
    return all_digits(s) && s.size() < 10 ? std::stoi(s) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

// Spaces and tabs only, not line ends: what these parsers have always trimmed.
std::string trim_blanks(const std::string& s) { return trim(s, " \t"); }

// "file:12:5" / "file:12" / "file" -> parts.
void split_location(const std::string& prefix, std::string* file, int* line, int* column) {
  *file = prefix;
  *line = 0;
  *column = 0;
  const size_t c2 = prefix.rfind(':');
  if (c2 == std::string::npos || !all_digits(prefix.substr(c2 + 1))) return;
  const size_t c1 = prefix.rfind(':', c2 - 1);
  if (c1 != std::string::npos && c2 > 0 && all_digits(prefix.substr(c1 + 1, c2 - c1 - 1))) {
    *file = prefix.substr(0, c1);
    *line = to_int(prefix.substr(c1 + 1, c2 - c1 - 1));
    *column = to_int(prefix.substr(c2 + 1));
  } else {
    *file = prefix.substr(0, c2);
    *line = to_int(prefix.substr(c2 + 1));
  }
}

enum class Kind { kNone, kError, kWarning, kIgnored };

// GCC/Clang/nvrtc-driver style: "<loc>: error: msg".
Kind parse_gcc(const std::string& line, Diagnostic* d) {
  static const std::vector<std::pair<std::string, Kind>> kMarkers = {{": fatal error: ", Kind::kError},
                                                                     {": error: ", Kind::kError},
                                                                     {": warning: ", Kind::kWarning},
                                                                     {": note: ", Kind::kIgnored}};
  size_t best = std::string::npos;
  Kind kind = Kind::kNone;
  size_t marker_len = 0;
  for (const auto& [marker, k] : kMarkers) {
    const size_t at = line.find(marker);
    if (at != std::string::npos && at < best) {
      best = at;
      kind = k;
      marker_len = marker.size();
    }
  }
  if (kind == Kind::kNone || best == 0) return Kind::kNone;
  split_location(line.substr(0, best), &d->file, &d->line, &d->column);
  d->message = line.substr(best + marker_len);
  return kind;
}

// EDG style (nvcc front end, NVRTC): "file(12): error #20: msg" or
// "file(12): warning #177-D: msg".
Kind parse_edg(const std::string& line, Diagnostic* d) {
  const size_t close = line.find("): ");
  if (close == std::string::npos) return Kind::kNone;
  const size_t open = line.rfind('(', close);
  if (open == std::string::npos || open == 0 || !all_digits(line.substr(open + 1, close - open - 1))) {
    return Kind::kNone;
  }
  const std::string rest = line.substr(close + 3);
  Kind kind = Kind::kNone;
  for (const auto& [word, k] : std::vector<std::pair<std::string, Kind>>{{"catastrophic error", Kind::kError},
                                                                         {"internal error", Kind::kError},
                                                                         {"error", Kind::kError},
                                                                         {"warning", Kind::kWarning},
                                                                         {"remark", Kind::kIgnored}}) {
    if (rest.rfind(word, 0) == 0) {
      kind = k;
      break;
    }
  }
  if (kind == Kind::kNone) return Kind::kNone;
  const size_t colon = rest.find(": ");
  if (colon == std::string::npos) return Kind::kNone;
  d->file = line.substr(0, open);
  d->line = to_int(line.substr(open + 1, close - open - 1));
  d->column = 0;
  d->message = rest.substr(colon + 2);
  return kind;
}

// "ptxas error   : msg", "nvlink error   : msg", "nvcc fatal   : msg".
Kind parse_tool(const std::string& line, Diagnostic* d) {
  for (const char* tool : {"ptxas", "nvlink", "fatbinary", "nvcc"}) {
    const std::string t = tool;
    if (line.rfind(t + " ", 0) != 0) continue;
    std::istringstream in(line.substr(t.size()));
    std::string severity;
    in >> severity;
    const size_t colon = line.find(':', t.size());
    if (colon == std::string::npos) return Kind::kNone;
    d->file = t;
    d->line = d->column = 0;
    d->message = trim_blanks(line.substr(colon + 1));
    if (severity == "error" || severity == "fatal") return Kind::kError;
    if (severity == "warning") return Kind::kWarning;
    return Kind::kIgnored;  // "ptxas info", "ptxas ." (resource usage lines)
  }
  return Kind::kNone;
}

Kind parse_linker(const std::string& line, Diagnostic* d) {
  for (const char* what : {"undefined reference to", "multiple definition of", "cannot find -l"}) {
    const size_t at = line.find(what);
    if (at == std::string::npos) continue;
    d->file = "ld";
    d->line = d->column = 0;
    d->message = line.substr(at);
    return Kind::kError;
  }
  return Kind::kNone;
}

// EDG prints the (preprocessed) line indented by two spaces and a caret line under it.
void read_edg_quote(const std::vector<std::string>& lines, size_t i, Diagnostic* d) {
  if (i + 2 >= lines.size()) return;
  const std::string& quoted = lines[i + 1];
  const std::string& caret = lines[i + 2];
  const size_t at = caret.find('^');
  if (at == std::string::npos || at < 2 || caret.find_first_not_of(" \t^") != std::string::npos) return;
  if (quoted.compare(0, 2, "  ") != 0) return;
  d->quoted_line = quoted.substr(2);
  d->quoted_caret = static_cast<int>(at - 2);
}

bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The source column of EDG's caret: find the quoted text from the caret on
// (or just the token under it) in the real source line; with several matches
// take the one nearest to where the caret would be.
int resolve_quoted_column(const std::string& source_line, const std::string& quoted, int caret) {
  const size_t c = static_cast<size_t>(caret);
  if (caret < 0 || c >= quoted.size()) return 0;
  const long growth = static_cast<long>(quoted.size()) - static_cast<long>(source_line.size());
  auto nearest = [&](const std::string& needle) -> int {
    if (needle.empty()) return 0;
    long best_pos = -1;
    long best_distance = 0;
    for (size_t at = source_line.find(needle); at != std::string::npos; at = source_line.find(needle, at + 1)) {
      const long pos = static_cast<long>(at);
      const long distance =
          std::min(std::labs(pos - static_cast<long>(c)), std::labs(pos - (static_cast<long>(c) - growth)));
      if (best_pos < 0 || distance < best_distance) {
        best_pos = pos;
        best_distance = distance;
      }
    }
    return best_pos < 0 ? 0 : static_cast<int>(best_pos) + 1;
  };
  std::string rest = quoted.substr(c);
  rest.erase(rest.find_last_not_of(" \t") + 1);
  if (int col = nearest(rest)) return col;
  size_t end = c;
  if (is_word(quoted[c])) {
    while (end < quoted.size() && is_word(quoted[end])) ++end;
  } else {
    end = c + 1;
  }
  if (int col = nearest(quoted.substr(c, end - c))) return col;
  return c < source_line.size() ? caret + 1 : 0;
}

bool is_candidate(const std::string& file, const std::string& name) {
  if (file == name) return true;
  return file.size() > name.size() && file.compare(file.size() - name.size(), name.size(), name) == 0 &&
         file[file.size() - name.size() - 1] == '/';
}

std::string clip(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  return s.substr(0, max > 3 ? max - 3 : 0) + "...";
}

// The quoted source line with a caret under `column`, GCC-style.
std::string quote_line(const std::vector<std::string>& source, int line, int column, size_t max_chars) {
  if (line < 1 || static_cast<size_t>(line) > source.size()) return "";
  std::string text = source[static_cast<size_t>(line) - 1];
  size_t col = column > 0 ? static_cast<size_t>(column) - 1 : std::string::npos;
  // Long (e.g. minified) lines: show a window around the column.
  if (text.size() > max_chars) {
    size_t start = 0;
    if (col != std::string::npos && col > max_chars / 2) start = std::min(col - max_chars / 2, text.size() - max_chars);
    text = text.substr(start, max_chars);
    if (col != std::string::npos) col -= start;
  }
  const std::string number = std::to_string(line);
  std::string out = " " + number + " | " + text + "\n";
  if (col != std::string::npos && col <= text.size()) {
    std::string pad;
    for (size_t k = 0; k < col; ++k) pad += text[k] == '\t' ? '\t' : ' ';
    out += " " + std::string(number.size(), ' ') + " | " + pad + "^\n";
  }
  return out;
}

std::string location(const std::string& file, int line, int column) {
  std::string s = file;
  if (line > 0) s += ":" + std::to_string(line);
  if (line > 0 && column > 0) s += ":" + std::to_string(column);
  return s;
}

}  // namespace

std::vector<Diagnostic> parse_diagnostics(const std::string& log) {
  const std::vector<std::string> lines = split_lines(log);
  std::vector<Diagnostic> out;
  std::set<std::tuple<int, std::string, int, int, std::string>> seen;
  Diagnostic context;  // the latest "required from here" location
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    // GCC: "file: In instantiation of ..." / "file: In function ..." start a new scope.
    if (line.find(": In ") != std::string::npos && line.find(": error:") == std::string::npos) {
      context = Diagnostic();
      continue;
    }
    if (line.find(":   required from") != std::string::npos) {
      const size_t at = line.find(":   required from");
      split_location(line.substr(0, at), &context.context_file, &context.context_line, &context.context_column);
      continue;
    }
    Diagnostic d;
    Kind kind = parse_tool(line, &d);
    if (kind == Kind::kNone) {
      kind = parse_edg(line, &d);
      if (kind != Kind::kNone) read_edg_quote(lines, i, &d);
    }
    if (kind == Kind::kNone) kind = parse_gcc(line, &d);
    if (kind == Kind::kNone) kind = parse_linker(line, &d);
    if (kind == Kind::kNone || kind == Kind::kIgnored) continue;
    d.severity = kind == Kind::kError ? Diagnostic::Severity::kError : Diagnostic::Severity::kWarning;
    d.message = trim_blanks(d.message);
    if (!context.context_file.empty() && context.context_file != d.file) {
      d.context_file = context.context_file;
      d.context_line = context.context_line;
      d.context_column = context.context_column;
    }
    if (seen.insert({static_cast<int>(d.severity), d.file, d.line, d.column, d.message}).second) {
      out.push_back(std::move(d));
    }
  }
  // "collect2: error: ld returned 1 exit status" only repeats the linker's errors.
  const bool has_linker_errors = std::any_of(out.begin(), out.end(), [](const Diagnostic& d) {
    return d.severity == Diagnostic::Severity::kError && d.file != "collect2";
  });
  if (has_linker_errors) {
    out.erase(std::remove_if(out.begin(), out.end(), [](const Diagnostic& d) { return d.file == "collect2"; }),
              out.end());
  }
  return out;
}

std::string condense_diagnostics(const std::string& log, const std::string& file_name, const std::string& source,
                                 bool failed, const DiagnosticsLimits& limits) {
  const std::vector<Diagnostic> all = parse_diagnostics(log);
  std::vector<Diagnostic> shown;
  for (const auto& d : all) {
    if (d.severity == Diagnostic::Severity::kError) shown.push_back(d);
  }
  const bool errors = !shown.empty();
  if (!errors) shown = all;  // warnings only
  const std::vector<std::string> source_lines = split_lines(source);

  std::string out;
  size_t count = 0;
  for (Diagnostic d : shown) {
    if (count == limits.max_errors) break;
    const bool mine = is_candidate(d.file, file_name);
    if (mine && d.column == 0 && d.line >= 1 && static_cast<size_t>(d.line) <= source_lines.size()) {
      d.column = resolve_quoted_column(source_lines[static_cast<size_t>(d.line) - 1], d.quoted_line, d.quoted_caret);
    }
    std::string block = location(d.file, d.line, d.column) + (d.file.empty() ? "" : ": ") +
                        (d.severity == Diagnostic::Severity::kError ? "error: " : "warning: ") +
                        clip(d.message, limits.max_line_chars * 2) + "\n";
    if (mine) {
      block += quote_line(source_lines, d.line, d.column, limits.max_line_chars);
    } else if (is_candidate(d.context_file, file_name)) {
      block += "  instantiated from " + location(d.context_file, d.context_line, d.context_column) + ":\n" +
               quote_line(source_lines, d.context_line, d.context_column, limits.max_line_chars);
    }
    if (!out.empty() && out.size() + block.size() > limits.max_chars) break;
    out += block;
    ++count;
  }
  if (count < shown.size()) {
    const size_t more = shown.size() - count;
    out += "(" + std::to_string(more) + " more " + (errors ? "error" : "warning") + (more == 1 ? "" : "s") +
           " not shown)\n";
  }
  if (out.empty() && failed) {
    // Nothing we recognize: the tail of the log is the best summary.
    std::vector<std::string> tail;
    for (const auto& line : split_lines(log)) {
      if (trim_blanks(line).empty() || line.rfind("ptxas info", 0) == 0) continue;
      tail.push_back(clip(line, limits.max_line_chars));
    }
    const size_t from = tail.size() > 20 ? tail.size() - 20 : 0;
    for (size_t i = from; i < tail.size(); ++i) out += tail[i] + "\n";
    if (out.empty()) out = "the compiler failed without printing a message\n";
  }
  if (out.size() > limits.max_chars) out = out.substr(0, limits.max_chars) + "\n[... truncated]\n";
  return out;
}

}  // namespace kforge::env
