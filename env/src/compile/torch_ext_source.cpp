#include "kforge/env/compile/torch_ext_source.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kforge/core/input_limits.h"
#include "kforge/core/trim.h"

namespace kforge::env {
namespace {

const char* kStreamExpr = "::kforge::torch_ext::current_stream()";

// ---- C++ side: launches ---------------------------------------------------

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

namespace {

// ---- Python side: the load_inline call and its strings --------------------

struct Token {
  enum Kind { kName, kString, kOp } kind;
  std::string text;  // name, operator character, or the string's value
  int line = 0;      // for strings: the line the value starts on
  size_t pos = 0;
};

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Python's escapes in a non-raw string; unknown ones stay as written, as in
// Python. A backslash before a newline joins the lines (as Python does).
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case '\n':
        break;
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '0':
        out += '\0';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'x':
        if (i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
          out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
          i += 2;
          break;
        }
        [[fallthrough]];
      default:
        out += '\\';
        out += c;
    }
  }
  return out;
}

// A light tokenizer: names, string literals (with prefixes, single and
// triple quotes) and single-character operators; comments dropped.
std::vector<Token> tokenize_python(const std::string& s, std::string* error) {
  std::vector<Token> tokens;
  int line = 1;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (std::isspace(static_cast<unsigned char>(c)) || c == '\\') {
      ++i;
    } else if (is_name_char(c) || c == '"' || c == '\'') {
      size_t j = i;
      while (j < s.size() && is_name_char(s[j])) ++j;
      if (j < s.size() && (s[j] == '"' || s[j] == '\'') && j - i <= 2) {
        // A string with an optional prefix (r, b, f, u, rb, ...).
        std::string prefix = s.substr(i, j - i);
        std::transform(prefix.begin(), prefix.end(), prefix.begin(), ::tolower);
        if (prefix.find_first_not_of("rbfu") != std::string::npos) {
          *error = "line " + std::to_string(line) + ": unexpected string prefix \"" + prefix + "\"";
          return {};
        }
        if (prefix.find('f') != std::string::npos) {
          *error = "line " + std::to_string(line) +
                   ": f-strings cannot be read as kernel source; write the source as a plain string";
          return {};
        }
        const bool raw = prefix.find('r') != std::string::npos;
        const std::string quote =
            s.compare(j, 3, std::string(3, s[j])) == 0 ? std::string(3, s[j]) : std::string(1, s[j]);
        const size_t begin = j + quote.size();
        size_t k = begin;
        while (k < s.size() && s.compare(k, quote.size(), quote) != 0) {
          if (s[k] == '\\') ++k;
          if (quote.size() == 1 && k < s.size() && s[k] == '\n') break;
          ++k;
        }
        if (k >= s.size() || s.compare(k, quote.size(), quote) != 0) {
          *error = "line " + std::to_string(line) + ": unterminated string literal";
          return {};
        }
        const std::string body = s.substr(begin, k - begin);
        tokens.push_back({Token::kString, raw ? body : unescape(body), line, i});
        line += static_cast<int>(std::count(body.begin(), body.end(), '\n'));
        i = k + quote.size();
      } else {
        tokens.push_back({Token::kName, s.substr(i, j - i), line, i});
        i = j;
      }
    } else {
      tokens.push_back({Token::kOp, std::string(1, c), line, i});
      ++i;
    }
  }
  return tokens;
}

struct Piece {
  std::string text;
  int line = 1;
};

struct Resolver {
  Resolver(const std::vector<Token>& all, size_t before) : tokens(all), limit(before) {}

  const std::vector<Token>& tokens;
  size_t limit;  // assignments after the load_inline call do not count
  std::string error;
  // Where each name occurs before `limit`, built once: looking every name up
  // by scanning back through the tokens would be quadratic in the source.
  std::map<std::string, std::vector<size_t>> occurrences;
  bool indexed = false;
  std::map<std::string, std::vector<Piece>> resolved;  // each name is looked up once
  size_t bytes = 0;                                    // of all strings collected, which names can repeat

  // Names repeated in a list copy their string each time: bounded, so that a
  // short file cannot expand to gigabytes.
  bool charge(size_t n) {
    bytes += n;
    if (bytes <= limits::kMaxDocumentBytes) return true;
    error = "the sources add up to more than " + std::to_string(limits::kMaxDocumentBytes) +
            " bytes (limits::kMaxDocumentBytes)";
    return false;
  }

  // Strings of a value that spans tokens [b, e): literals (adjacent ones
  // concatenated), names bound to literals, and lists of those.
  std::vector<Piece> value(size_t b, size_t e, const std::string& what) {
    std::vector<Piece> out;
    for (size_t i = b; i < e; ++i) {
      const Token& t = tokens[i];
      if (t.kind == Token::kString) {
        if (!charge(t.text.size())) return {};
        if (i > b && tokens[i - 1].kind == Token::kString && !out.empty()) {
          out.back().text += t.text;
        } else {
          out.push_back({t.text, t.line});
        }
      } else if (t.kind == Token::kName) {
        auto memo = resolved.find(t.text);
        if (memo == resolved.end()) memo = resolved.emplace(t.text, variable(t.text, what)).first;
        if (!error.empty()) return {};
        const std::vector<Piece>& bound = memo->second;
        for (const Piece& p : bound) {
          if (!charge(p.text.size())) return {};
        }
        out.insert(out.end(), bound.begin(), bound.end());
      } else if (t.text != "[" && t.text != "]" && t.text != "(" && t.text != ")" && t.text != ",") {
        error = what + " must be a string, a name bound to a string, or a list of those (found \"" + t.text +
                "\" on line " + std::to_string(t.line) + ")";
        return {};
      }
    }
    return out;
  }

  // The last `name = <strings>` before the call.
  std::vector<Piece> variable(const std::string& name, const std::string& what) {
    if (!indexed) {
      for (size_t i = 0; i < std::min(limit, tokens.size()); ++i) {
        if (tokens[i].kind == Token::kName) occurrences[tokens[i].text].push_back(i);
      }
      indexed = true;
    }
    static const std::vector<size_t> kNone;
    auto found = occurrences.find(name);
    const std::vector<size_t>& where = found == occurrences.end() ? kNone : found->second;
    for (size_t n = where.size(); n-- > 0;) {
      const size_t i = where[n];
      if (i + 2 >= tokens.size() || tokens[i + 1].text != "=" || tokens[i + 2].text == "=") continue;
      if (i > 0 && (tokens[i - 1].text == "." || tokens[i - 1].text == "(" || tokens[i - 1].text == ",")) continue;
      size_t e = i + 2;
      while (e < tokens.size() && (tokens[e].kind == Token::kString || tokens[e].text == "(" || tokens[e].text == ")"))
        ++e;
      if (e == i + 2) break;
      return value(i + 2, e, what);
    }
    error =
        what + " names \"" + name + "\", but no `" + name + " = \"\"\"...\"\"\"` string assignment precedes the call";
    return {};
  }
};

std::string line_directive(int line, const std::string& file) {
  return "#line " + std::to_string(line) + " \"" + file + "\"\n";
}

TorchExtSource from_python(const std::string& source) {
  TorchExtSource r;
  r.file_name = "candidate.py";
  std::string error;
  const std::vector<Token> tokens = tokenize_python(source, &error);
  if (!error.empty()) {
    r.error = "torch_ext: cannot read the Python solution: " + error;
    return r;
  }
  size_t call = 0;
  for (; call + 1 < tokens.size(); ++call) {
    if (tokens[call].kind == Token::kName && tokens[call].text == "load_inline" && tokens[call + 1].text == "(") break;
  }
  if (call + 1 >= tokens.size()) {
    r.error =
        "torch_ext: the Python solution has no load_inline(...) call; give the cuda_sources string to "
        "load_inline, or submit the CUDA source alone";
    return r;
  }
  // Keyword arguments of the call: name -> token range of the value.
  struct Range {
    size_t b, e;
  };
  std::vector<std::pair<std::string, Range>> kwargs;
  size_t i = call + 2;
  int depth = 0;
  size_t arg_begin = i;
  for (; i < tokens.size(); ++i) {
    const std::string& t = tokens[i].text;
    const bool op = tokens[i].kind == Token::kOp;
    if (op && (t == "(" || t == "[" || t == "{")) ++depth;
    if (op && (t == ")" || t == "]" || t == "}")) {
      if (depth == 0) break;
      --depth;
    }
    if (op && t == "," && depth == 0) {
      if (i > arg_begin + 1 && tokens[arg_begin + 1].text == "=") {
        kwargs.push_back({tokens[arg_begin].text, {arg_begin + 2, i}});
      }
      arg_begin = i + 1;
    }
  }
  if (i > arg_begin + 1 && tokens[arg_begin + 1].text == "=")
    kwargs.push_back({tokens[arg_begin].text, {arg_begin + 2, i}});
  auto find = [&](const std::string& name) -> const Range* {
    for (const auto& kv : kwargs) {
      if (kv.first == name) return &kv.second;
    }
    return nullptr;
  };

  Resolver resolver(tokens, call);
  const Range* cuda = find("cuda_sources");
  if (cuda == nullptr) {
    r.error =
        "torch_ext: load_inline(...) has no cuda_sources=...; the kernels and the function that launches them "
        "go there";
    return r;
  }
  std::vector<Piece> pieces = resolver.value(cuda->b, cuda->e, "cuda_sources");
  if (const Range* cpp = find("cpp_sources"); cpp != nullptr && resolver.error.empty()) {
    // Usually the entry's declaration; definitions there are built too.
    std::vector<Piece> more = resolver.value(cpp->b, cpp->e, "cpp_sources");
    pieces.insert(pieces.end(), more.begin(), more.end());
  }
  if (!resolver.error.empty()) {
    r.error = "torch_ext: " + resolver.error;
    return r;
  }

  std::vector<std::string> functions;
  if (const Range* f = find("functions"); f != nullptr) {
    for (size_t k = f->b; k < f->e; ++k) {
      if (tokens[k].kind == Token::kString) functions.push_back(tokens[k].text);
    }
  }
  if (functions.empty()) {
    r.error = "torch_ext: load_inline(...) needs functions=[\"<entry>\"]: the function ModelNew.forward calls";
    return r;
  }
  if (functions.size() > limits::kMaxTorchExtFunctions) {
    r.error = "torch_ext: functions=[...] lists " + std::to_string(functions.size()) + " functions; at most " +
              std::to_string(limits::kMaxTorchExtFunctions) +
              " (limits::kMaxTorchExtFunctions), and kf_forward calls one: list only the function forward calls";
    return r;
  }
  if (functions.size() == 1) {
    r.entry = functions[0];
  } else {
    // Several bound functions: the one forward() calls.
    const size_t fwd = source.find("def forward");
    std::vector<std::string> called;
    for (const auto& name : functions) {
      if (fwd != std::string::npos && source.find("." + name + "(", fwd) != std::string::npos) called.push_back(name);
    }
    if (called.size() != 1) {
      r.error = "torch_ext: functions=[...] lists " + std::to_string(functions.size()) +
                " functions and ModelNew.forward calls " + std::to_string(called.size()) +
                " of them; kf_forward calls one entry: list only the function forward calls";
      return r;
    }
    r.entry = called[0];
  }
  for (const Piece& p : pieces) r.text += line_directive(p.line, r.file_name) + p.text + "\n";
  return r;
}

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
