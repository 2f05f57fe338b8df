// Compiler output condensed for the policy (docs/architecture.md#environment: "compiler errors
// trimmed to what matters").
//
// A policy reads the first few errors, each with line:col in its own source
// and the offending line; it does not need template-instantiation backtraces,
// notes, candidate lists, or warnings when there are errors. The full log
// stays in CompileResult::log for humans.
//
// Understands GCC/Clang ("file:line:col: error: ..."), EDG as used by nvcc
// and NVRTC ("file(line): error: ..." plus a caret line), ptxas/nvlink
// ("ptxas error   : ...") and linker ("undefined reference to ...") output.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kforge::env {

struct Diagnostic {
  enum class Severity { kError, kWarning };
  Severity severity = Severity::kError;
  std::string file;  // as printed; empty or a tool name ("ptxas", "ld") without location
  int line = 0;      // 1-based; 0 when unknown
  int column = 0;    // 1-based; 0 when unknown
  std::string message;
  // For an error reported inside a header during a template instantiation:
  // the place that instantiated it ("required from here"), if printed.
  std::string context_file;
  int context_line = 0;
  int context_column = 0;
  // EDG quotes the line after preprocessing (__global__ is shown expanded,
  // tabs as spaces) with a caret under it, so the caret's offset is not the
  // column in the source. Kept here (0-based caret) and mapped onto the
  // source line by condense_diagnostics; `column` stays 0 meanwhile.
  std::string quoted_line;
  int quoted_caret = -1;
};

// Every error and warning of a log, in order, duplicates removed. Notes,
// remarks and instantiation backtraces are not diagnostics of their own.
std::vector<Diagnostic> parse_diagnostics(const std::string& log);

struct DiagnosticsLimits {
  size_t max_errors = 5;
  size_t max_chars = 2400;      // whole text
  size_t max_line_chars = 160;  // one quoted source line or message
};

// The policy's view of `log`. `file_name` is the candidate's file as the
// compiler names it ("candidate.cu"); its lines are quoted from `source`.
// Errors only, or warnings when there are no errors; `failed` with nothing
// recognizable falls back to the last lines of the log.
std::string condense_diagnostics(const std::string& log, const std::string& file_name, const std::string& source,
                                 bool failed, const DiagnosticsLimits& limits = {});

}  // namespace kforge::env
