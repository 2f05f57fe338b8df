#include "torch_ext_python.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "kforge/core/input_limits.h"

namespace kforge::env::internal {
namespace {

struct Token {
  enum Kind { kName, kString, kOp } kind;
  std::string text;  // name, operator character, or the string's value
  int line = 0;      // for strings: the line the value starts on
  size_t pos = 0;
};

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

// Keyword arguments of a call: name -> token range of the value.
struct Range {
  size_t b, e;
};
using Kwargs = std::vector<std::pair<std::string, Range>>;

// The first `load_inline(`, or tokens.size() when there is none.
size_t find_load_inline(const std::vector<Token>& tokens) {
  for (size_t call = 0; call + 1 < tokens.size(); ++call) {
    if (tokens[call].kind == Token::kName && tokens[call].text == "load_inline" && tokens[call + 1].text == "(") {
      return call;
    }
  }
  return tokens.size();
}

Kwargs keyword_arguments(const std::vector<Token>& tokens, size_t call) {
  Kwargs kwargs;
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
  if (i > arg_begin + 1 && tokens[arg_begin + 1].text == "=") {
    kwargs.push_back({tokens[arg_begin].text, {arg_begin + 2, i}});
  }
  return kwargs;
}

const Range* find_kwarg(const Kwargs& kwargs, const std::string& name) {
  for (const auto& kv : kwargs) {
    if (kv.first == name) return &kv.second;
  }
  return nullptr;
}

// The function kf_forward calls: the only one bound, or the one of several
// that ModelNew.forward calls. Empty with *error set when neither is clear.
std::string choose_entry(const std::string& source, const std::vector<Token>& tokens, const Kwargs& kwargs,
                         std::string* error) {
  std::vector<std::string> functions;
  if (const Range* f = find_kwarg(kwargs, "functions"); f != nullptr) {
    for (size_t k = f->b; k < f->e; ++k) {
      if (tokens[k].kind == Token::kString) functions.push_back(tokens[k].text);
    }
  }
  if (functions.empty()) {
    *error = "torch_ext: load_inline(...) needs functions=[\"<entry>\"]: the function ModelNew.forward calls";
    return "";
  }
  if (functions.size() > limits::kMaxTorchExtFunctions) {
    *error = "torch_ext: functions=[...] lists " + std::to_string(functions.size()) + " functions; at most " +
             std::to_string(limits::kMaxTorchExtFunctions) +
             " (limits::kMaxTorchExtFunctions), and kf_forward calls one: list only the function forward calls";
    return "";
  }
  if (functions.size() == 1) return functions[0];
  const size_t fwd = source.find("def forward");
  std::vector<std::string> called;
  for (const auto& name : functions) {
    if (fwd != std::string::npos && source.find("." + name + "(", fwd) != std::string::npos) called.push_back(name);
  }
  if (called.size() != 1) {
    *error = "torch_ext: functions=[...] lists " + std::to_string(functions.size()) +
             " functions and ModelNew.forward calls " + std::to_string(called.size()) +
             " of them; kf_forward calls one entry: list only the function forward calls";
    return "";
  }
  return called[0];
}

}  // namespace

TorchExtSource from_python(const std::string& source) {
  TorchExtSource r;
  r.file_name = "candidate.py";
  std::string error;
  const std::vector<Token> tokens = tokenize_python(source, &error);
  if (!error.empty()) {
    r.error = "torch_ext: cannot read the Python solution: " + error;
    return r;
  }
  const size_t call = find_load_inline(tokens);
  if (call + 1 >= tokens.size()) {
    r.error =
        "torch_ext: the Python solution has no load_inline(...) call; give the cuda_sources string to "
        "load_inline, or submit the CUDA source alone";
    return r;
  }
  const Kwargs kwargs = keyword_arguments(tokens, call);
  Resolver resolver(tokens, call);
  const Range* cuda = find_kwarg(kwargs, "cuda_sources");
  if (cuda == nullptr) {
    r.error =
        "torch_ext: load_inline(...) has no cuda_sources=...; the kernels and the function that launches them "
        "go there";
    return r;
  }
  std::vector<Piece> pieces = resolver.value(cuda->b, cuda->e, "cuda_sources");
  if (const Range* cpp = find_kwarg(kwargs, "cpp_sources"); cpp != nullptr && resolver.error.empty()) {
    // Usually the entry's declaration; definitions there are built too.
    std::vector<Piece> more = resolver.value(cpp->b, cpp->e, "cpp_sources");
    pieces.insert(pieces.end(), more.begin(), more.end());
  }
  if (!resolver.error.empty()) {
    r.error = "torch_ext: " + resolver.error;
    return r;
  }
  r.entry = choose_entry(source, tokens, kwargs, &r.error);
  if (!r.error.empty()) return r;
  for (const Piece& p : pieces) r.text += line_directive(p.line, r.file_name) + p.text + "\n";
  return r;
}

}  // namespace kforge::env::internal
