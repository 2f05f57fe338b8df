// Kernel launches given the harness's stream (give_launches_the_stream in
// torch_ext_source.h): a scan of the C++ text that skips comments and
// literals and reads each `<<<...>>>` configuration.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "kforge/core/input_limits.h"
#include "kforge/core/trim.h"
#include "kforge/env/compile/torch_ext_source.h"

namespace kforge::env {
namespace {

// Skips a comment or a string/character literal starting at `i`; returns the
// index after it, or `i` when there is none there.
size_t skip_cpp_literal(const std::string& s, size_t i) {
  // Characters compared directly: this runs once per character of the source.
  const char c = s[i];
  if (c != '/' && c != '"' && c != '\'') return i;
  const char next = i + 1 < s.size() ? s[i + 1] : '\0';
  if (c == '/' && next == '/') {
    const size_t end = s.find('\n', i);
    return end == std::string::npos ? s.size() : end;
  }
  if (c == '/' && next == '*') {
    const size_t end = s.find("*/", i + 2);
    return end == std::string::npos ? s.size() : end + 2;
  }
  if (s[i] == '"' || s[i] == '\'') {
    // Raw strings (R"(...)") are rare in kernels; an unterminated one ends the scan safely.
    if (s[i] == '"' && i > 0 && s[i - 1] == 'R') {
      const size_t open = s.find('(', i);
      if (open == std::string::npos) return s.size();
      const std::string close = ")" + s.substr(i + 1, open - i - 1) + "\"";
      const size_t end = s.find(close, open);
      return end == std::string::npos ? s.size() : end + close.size();
    }
    const char q = s[i];
    size_t j = i + 1;
    while (j < s.size() && s[j] != q && s[j] != '\n') j += s[j] == '\\' ? 2 : 1;
    return std::min(j + 1, s.size());
  }
  return i;
}

// "<<<" or ">>>" at `i`.
bool is_triple(const std::string& s, size_t i, char c) {
  return i + 2 < s.size() && s[i] == c && s[i + 1] == c && s[i + 2] == c;
}

bool is_default_stream(const std::string& arg) {
  static const std::set<std::string> kDefault = {"0",
                                                 "NULL",
                                                 "nullptr",
                                                 "cudaStreamDefault",
                                                 "(cudaStream_t)0",
                                                 "(cudaStream_t) 0",
                                                 "cudaStream_t(0)",
                                                 "cudaStreamLegacy"};
  return kDefault.count(trim(arg)) > 0;
}

}  // namespace

std::string give_launches_the_stream(const std::string& cuda, const std::string& stream_expr, int* count) {
  std::string out;
  out.reserve(cuda.size() + 256);
  int changed = 0;
  size_t i = 0;
  while (i < cuda.size()) {
    const size_t skipped = skip_cpp_literal(cuda, i);
    if (skipped != i) {
      out.append(cuda, i, skipped - i);
      i = skipped;
      continue;
    }
    if (!is_triple(cuda, i, '<')) {
      out += cuda[i++];
      continue;
    }
    // The launch configuration: top-level commas split it; nested (), [],
    // {} and template <> inside the arguments do not. A `;` at the top level
    // or more than limits::kMaxLaunchConfigChars characters mean this `<<<`
    // starts no launch, and the text it scanned is copied as it is (a `<<<`
    // inside it is not read as a launch either), so every character is
    // scanned once however many unclosed `<<<` the source holds.
    size_t j = i + 3, arg_start = j;
    const size_t scan_end = std::min(cuda.size(), i + 3 + limits::kMaxLaunchConfigChars);
    int depth = 0;
    std::vector<std::pair<size_t, size_t>> args;
    bool closed = false;
    while (j < scan_end) {
      const size_t lit = skip_cpp_literal(cuda, j);
      if (lit != j) {
        j = lit;
        continue;
      }
      if (depth == 0 && is_triple(cuda, j, '>')) {
        args.emplace_back(arg_start, j);
        closed = true;
        break;
      }
      const char c = cuda[j];
      if (c == ';' && depth == 0) break;
      if (c == '(' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == ']' || c == '}') --depth;
      if (c == ',' && depth == 0) {
        args.emplace_back(arg_start, j);
        arg_start = j + 1;
      }
      ++j;
    }
    if (!closed) {  // not a launch we understand: copy what was scanned as it is
      j = std::min(std::max(j, i + 3), cuda.size());
      out.append(cuda, i, j - i);
      i = j;
      continue;
    }
    std::string config = cuda.substr(i, j - i);  // "<<<a, b[, c[, d]]"
    if (args.size() == 2) {
      config += ", 0, " + stream_expr;
      ++changed;
    } else if (args.size() == 3) {
      config += ", " + stream_expr;
      ++changed;
    } else if (args.size() == 4 && is_default_stream(cuda.substr(args[3].first, args[3].second - args[3].first))) {
      // Keep the line breaks of the replaced argument so lines do not move.
      const std::string old = cuda.substr(args[3].first, args[3].second - args[3].first);
      config = cuda.substr(i, args[3].first - i) + " " + stream_expr +
               std::string(static_cast<size_t>(std::count(old.begin(), old.end(), '\n')), '\n');
      ++changed;
    }
    out += config;
    out += ">>>";
    i = j + 3;
  }
  if (count != nullptr) *count = changed;
  return out;
}

}  // namespace kforge::env
