#include "kforge/env/compile/torch_ext_source.h"

#include <cctype>
#include <set>
#include <string>

#include "kforge/core/input_limits.h"
#include "torch_ext_python.h"

namespace kforge::env {

using internal::from_python;
using internal::is_name_char;

namespace {

const char* kStreamExpr = "::kforge::torch_ext::current_stream()";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

size_t skip_spaces(const std::string& s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// Names of the functions defined as `torch::Tensor name(...) {` (or
// at::Tensor; a template's closing '>' may follow the type). One linear pass:
// no std::regex, whose matcher recurses per character and overflows the
// stack on long input. For each candidate the parameter list runs to the
// first ';' or '{' (neither occurs in a parameter list) and must end with
// ')'; the position of that first ';' or '{' is remembered, so nested
// candidates do not rescan.
std::set<std::string> tensor_function_names(const std::string& source) {
  std::set<std::string> names;
  size_t stop = 0;  // position of the next ';' or '{' at or after `stop_from`
  size_t stop_from = std::string::npos;
  for (size_t i = 0; i < source.size(); ++i) {
    size_t type_end = 0;
    if (source[i] != 't' && source[i] != 'a') continue;
    if (source.compare(i, 13, "torch::Tensor") == 0) {
      type_end = i + 13;
    } else if (source.compare(i, 10, "at::Tensor") == 0) {
      type_end = i + 10;
    } else {
      continue;
    }
    if (i > 0 && is_name_char(source[i - 1])) continue;  // e.g. mytorch::Tensor
    // Blanks, an optional '>' (a template argument's end), then at least one blank.
    size_t j = skip_spaces(source, type_end);
    if (j < source.size() && source[j] == '>') {
      const size_t after = j + 1;
      j = skip_spaces(source, after);
      if (j == after) continue;
    } else if (j == type_end) {
      continue;
    }
    const size_t name_begin = j;
    if (j >= source.size() || !(std::isalpha(static_cast<unsigned char>(source[j])) || source[j] == '_')) continue;
    while (j < source.size() && is_name_char(source[j])) ++j;
    const size_t name_end = j;
    j = skip_spaces(source, j);
    if (j >= source.size() || source[j] != '(') continue;
    if (stop_from == std::string::npos || j < stop_from || j >= stop) {
      stop = source.find_first_of(";{", j);
      stop_from = j;
    }
    if (stop == std::string::npos || source[stop] != '{') continue;
    size_t k = stop;
    while (k > j && is_space(source[k - 1])) --k;
    if (k > j && source[k - 1] == ')') names.insert(source.substr(name_begin, name_end - name_begin));
  }
  return names;
}

TorchExtSource from_cuda(const std::string& source) {
  TorchExtSource r;
  r.file_name = "candidate.cu";
  r.text = source;
  const std::set<std::string> names = tensor_function_names(source);
  if (names.size() != 1) {
    std::string listed;
    for (const auto& n : names) listed += (listed.empty() ? "" : ", ") + n;
    r.error = names.empty()
                  ? "torch_ext: no function returning torch::Tensor found; the entry takes the task's tensors and "
                    "returns the output(s)"
                  : "torch_ext: several functions return torch::Tensor (" + listed +
                        "); submit the KernelBench Python file with functions=[\"<entry>\"], or keep one";
    return r;
  }
  r.entry = *names.begin();
  return r;
}

// A line that starts (after blanks) with `import x` or `from x`, in a source
// that calls load_inline.
bool looks_like_python(const std::string& source) {
  if (source.find("load_inline") == std::string::npos) return false;
  size_t i = 0;
  while (i < source.size()) {
    i = skip_spaces(source, i);
    for (const char* keyword : {"import", "from"}) {
      const size_t n = std::char_traits<char>::length(keyword);
      if (source.compare(i, n, keyword) != 0) continue;
      size_t j = i + n;
      if (j >= source.size() || !is_space(source[j])) continue;
      j = skip_spaces(source, j);
      if (j < source.size() && is_name_char(source[j])) return true;
    }
    const size_t eol = source.find('\n', i);
    if (eol == std::string::npos) break;
    i = eol + 1;
  }
  return false;
}

// The longest run of identifier characters, with the line it starts on.
std::string check_identifier_runs(const std::string& source) {
  size_t run = 0;
  int line = 1;
  int run_line = 1;
  for (char c : source) {
    if (is_name_char(c)) {
      if (run == 0) run_line = line;
      if (++run > limits::kMaxIdentifierChars) {
        return "torch_ext: line " + std::to_string(run_line) + ": a name (a run of letters, digits and '_') longer " +
               "than " + std::to_string(limits::kMaxIdentifierChars) +
               " characters (limits::kMaxIdentifierChars); shorten it";
      }
    } else {
      run = 0;
      if (c == '\n') ++line;
    }
  }
  return "";
}

}  // namespace

TorchExtSource prepare_torch_ext_source(const std::string& source) {
  if (std::string why = check_identifier_runs(source); !why.empty()) {
    TorchExtSource r;
    r.file_name = "candidate";
    r.error = why;
    return r;
  }
  TorchExtSource r = looks_like_python(source) ? from_python(source) : from_cuda(source);
  if (!r.error.empty()) return r;
  r.text = give_launches_the_stream(r.text, kStreamExpr, &r.rewritten_launches);
  r.text += "\n#line 1 \"kforge_torch_ext_entry\"\n#include \"kforge/torch_ext_entry.h\"\nKFORGE_TORCH_EXT_ENTRY(" +
            r.entry + ")\n";
  return r;
}

}  // namespace kforge::env
