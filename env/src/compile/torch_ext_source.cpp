#include "kforge/env/compile/torch_ext_source.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>

namespace kforge::env {
namespace {

const char* kStreamExpr = "::kforge::torch_ext::current_stream()";

// ---- C++ side: launches ---------------------------------------------------

// Skips a comment or a string/character literal starting at `i`; returns the
// index after it, or `i` when there is none there.
size_t skip_cpp_literal(const std::string& s, size_t i) {
  if (s.compare(i, 2, "//") == 0) {
    const size_t end = s.find('\n', i);
    return end == std::string::npos ? s.size() : end;
  }
  if (s.compare(i, 2, "/*") == 0) {
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

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
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
    if (cuda.compare(i, 3, "<<<") != 0) {
      out += cuda[i++];
      continue;
    }
    // The launch configuration: top-level commas split it; nested (), [],
    // {} and template <> inside the arguments do not.
    size_t j = i + 3, arg_start = j;
    int depth = 0;
    std::vector<std::pair<size_t, size_t>> args;
    bool closed = false;
    while (j < cuda.size()) {
      const size_t lit = skip_cpp_literal(cuda, j);
      if (lit != j) {
        j = lit;
        continue;
      }
      if (depth == 0 && cuda.compare(j, 3, ">>>") == 0) {
        args.emplace_back(arg_start, j);
        closed = true;
        break;
      }
      const char c = cuda[j];
      if (c == '(' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == ']' || c == '}') --depth;
      if (c == ',' && depth == 0) {
        args.emplace_back(arg_start, j);
        arg_start = j + 1;
      }
      ++j;
    }
    if (!closed) {  // not a launch we understand: copy it as it is
      out.append(cuda, i, 3);
      i += 3;
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
  const std::vector<Token>& tokens;
  size_t limit;  // assignments after the load_inline call do not count
  std::string error;

  // Strings of a value that spans tokens [b, e): literals (adjacent ones
  // concatenated), names bound to literals, and lists of those.
  std::vector<Piece> value(size_t b, size_t e, const std::string& what) {
    std::vector<Piece> out;
    for (size_t i = b; i < e; ++i) {
      const Token& t = tokens[i];
      if (t.kind == Token::kString) {
        if (i > b && tokens[i - 1].kind == Token::kString && !out.empty()) {
          out.back().text += t.text;
        } else {
          out.push_back({t.text, t.line});
        }
      } else if (t.kind == Token::kName) {
        std::vector<Piece> bound = variable(t.text, what);
        if (!error.empty()) return {};
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
    for (size_t i = std::min(limit, tokens.size()); i-- > 0;) {
      if (tokens[i].kind != Token::kName || tokens[i].text != name) continue;
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

  Resolver resolver{tokens, call, ""};
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

TorchExtSource from_cuda(const std::string& source) {
  TorchExtSource r;
  r.file_name = "candidate.cu";
  r.text = source;
  static const std::regex kEntry(R"((?:torch|at)::Tensor\s*>?\s+([A-Za-z_]\w*)\s*\([^;{]*\)\s*\{)");
  std::set<std::string> names;
  for (std::sregex_iterator it(source.begin(), source.end(), kEntry), end; it != end; ++it)
    names.insert((*it)[1].str());
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

bool looks_like_python(const std::string& source) {
  static const std::regex kPython(R"((^|\n)\s*(import|from)\s+\w)");
  return source.find("load_inline") != std::string::npos && std::regex_search(source, kPython);
}

}  // namespace

TorchExtSource prepare_torch_ext_source(const std::string& source) {
  TorchExtSource r = looks_like_python(source) ? from_python(source) : from_cuda(source);
  if (!r.error.empty()) return r;
  r.text = give_launches_the_stream(r.text, kStreamExpr, &r.rewritten_launches);
  r.text += "\n#line 1 \"kforge_torch_ext_entry\"\n#include \"kforge/torch_ext_entry.h\"\nKFORGE_TORCH_EXT_ENTRY(" +
            r.entry + ")\n";
  return r;
}

}  // namespace kforge::env
