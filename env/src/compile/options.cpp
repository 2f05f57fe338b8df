#include "kforge/env/compile/options.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <sstream>

namespace kforge::env {
namespace {

// nullopt: allowed. A string: refused, with the reason (may be empty).
using Verdict = std::optional<std::string>;
const Verdict kAllowed = std::nullopt;

bool one_of(const std::string& v, const std::vector<std::string>& set) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// NAME or NAME=VALUE with a printable VALUE.
bool is_macro(const std::string& s) {
  const size_t eq = s.find('=');
  if (!is_identifier(s.substr(0, eq))) return false;
  if (eq == std::string::npos) return true;
  return std::all_of(s.begin() + static_cast<long>(eq) + 1, s.end(),
                     [](char c) { return std::isprint(static_cast<unsigned char>(c)); });
}

bool is_int_in(const std::string& s, int lo, int hi) {
  if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), ::isdigit)) return false;
  const int v = std::stoi(s);
  return v >= lo && v <= hi;
}

std::vector<std::string> tokenize(const std::vector<std::string>& options) {
  std::vector<std::string> tokens;
  for (const auto& option : options) {
    std::istringstream in(option);
    std::string t;
    while (in >> t) tokens.push_back(t);
  }
  return tokens;
}

// ---- host (g++) ----

const std::vector<std::string>& host_exact() {
  static const std::vector<std::string> kFlags = {"-O0",
                                                  "-O1",
                                                  "-O2",
                                                  "-O3",
                                                  "-Os",
                                                  "-Ofast",
                                                  "-march=native",
                                                  "-mtune=native",
                                                  "-ffast-math",
                                                  "-funroll-loops",
                                                  "-funroll-all-loops",
                                                  "-fno-math-errno",
                                                  "-fno-trapping-math",
                                                  "-fassociative-math",
                                                  "-freciprocal-math",
                                                  "-fno-signed-zeros",
                                                  "-ffinite-math-only",
                                                  "-fno-finite-math-only",
                                                  "-fopenmp-simd",
                                                  "-ftree-vectorize",
                                                  "-fno-tree-vectorize",
                                                  "-fomit-frame-pointer",
                                                  "-fstrict-aliasing",
                                                  "-fno-strict-aliasing",
                                                  "-fno-exceptions",
                                                  "-fno-rtti",
                                                  "-fprefetch-loop-arrays",
                                                  "-fpeel-loops",
                                                  "-fipa-pta",
                                                  "-fno-semantic-interposition",
                                                  "-mavx",
                                                  "-mavx2",
                                                  "-mfma",
                                                  "-mf16c",
                                                  "-mbmi",
                                                  "-mbmi2",
                                                  "-mpopcnt",
                                                  "-msse4.2",
                                                  "-mavx512f",
                                                  "-mavx512bw",
                                                  "-mavx512vl",
                                                  "-mavx512dq",
                                                  "-mavx512cd",
                                                  "-mavx512vnni",
                                                  "-mavx512bf16",
                                                  "-mavx512fp16",
                                                  "-w",
                                                  "-Wall",
                                                  "-Wextra",
                                                  "-g",
                                                  "-g0"};
  return kFlags;
}

const std::string& host_allowed_summary() {
  static const std::string kSummary = [] {
    std::string s;
    for (const auto& f : host_exact()) s += f + " ";
    return s +
           "-std=c++14|c++17|c++20|gnu++14|gnu++17|gnu++20 -ffp-contract=fast|on|off "
           "-fvect-cost-model=unlimited|dynamic|cheap|very-cheap -mprefer-vector-width=128|256|512 "
           "-DNAME[=VALUE] -UNAME";
  }();
  return kSummary;
}

// Reasons for the flags a policy is most likely to try.
Verdict common_refusal(const std::string& t) {
  if (starts_with(t, "-fopenmp") && t != "-fopenmp-simd") {
    return "OpenMP needs the libgomp runtime and threads, which the runner does not allow (-fopenmp-simd is allowed)";
  }
  if (starts_with(t, "-l") || starts_with(t, "-L") || starts_with(t, "-Wl,") || t == "-Xlinker" ||
      starts_with(t, "--library")) {
    return "linking is fixed by the environment; libraries the task allows are linked automatically";
  }
  if (starts_with(t, "-I") || starts_with(t, "-isystem") || starts_with(t, "-iquote") || starts_with(t, "-idirafter") ||
      starts_with(t, "-include") || starts_with(t, "-imacros") || starts_with(t, "--include-path") ||
      starts_with(t, "--pre-include")) {
    return "include paths are fixed: a candidate may include kforge/kernel_abi.h and the compiler's own headers";
  }
  if (starts_with(t, "-fplugin") || starts_with(t, "-B") || starts_with(t, "--specs") || starts_with(t, "-specs") ||
      starts_with(t, "@")) {
    return "it would run or read files chosen by the solution";
  }
  if (t == "-o" || starts_with(t, "-o") || t == "-c" || t == "-S" || t == "-E" || t == "-x" || t == "-shared" ||
      t == "-static" || starts_with(t, "-save-temps") || starts_with(t, "-M")) {
    return "the output and the compilation steps are managed by the environment";
  }
  if (t == "-pthread" || starts_with(t, "-fsanitize") || starts_with(t, "-fprofile") || t == "--coverage" ||
      starts_with(t, "-finstrument")) {
    return "it adds a runtime the runner does not allow";
  }
  return std::nullopt;
}

Verdict host_verdict(const std::string& t) {
  if (one_of(t, host_exact())) return kAllowed;
  if (starts_with(t, "-std=") && one_of(t.substr(5), {"c++14", "c++17", "c++20", "gnu++14", "gnu++17", "gnu++20"})) {
    return kAllowed;
  }
  if (starts_with(t, "-ffp-contract=") && one_of(t.substr(14), {"fast", "on", "off"})) return kAllowed;
  if (starts_with(t, "-fvect-cost-model=") && one_of(t.substr(18), {"unlimited", "dynamic", "cheap", "very-cheap"})) {
    return kAllowed;
  }
  if (starts_with(t, "-mprefer-vector-width=") && one_of(t.substr(22), {"128", "256", "512"})) return kAllowed;
  if ((starts_with(t, "-D") && is_macro(t.substr(2))) || (starts_with(t, "-U") && is_identifier(t.substr(2)))) {
    return kAllowed;
  }
  if (auto reason = common_refusal(t)) return reason;
  return std::string();
}

std::string refusal(const std::string& flag, const std::string& reason, const std::string& allowed,
                    const std::string& compiler) {
  return "option \"" + flag + "\" is not allowed for " + compiler + (reason.empty() ? "" : ": " + reason) +
         ".\nAllowed options: " + allowed;
}

// ---- ptxas (through nvcc or NVRTC) ----

Verdict ptxas_verdict(const std::string& t) {
  if (one_of(t, {"-O0", "-O1", "-O2", "-O3", "-v", "--verbose", "--warn-on-spills", "-warn-spills",
                 "--warn-on-local-memory-usage", "-warn-lmem-usage", "--warn-on-double-precision-use",
                 "-warn-double-usage"})) {
    return kAllowed;
  }
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> kValued = {
      {{"--allow-expensive-optimizations=", "-allow-expensive-optimizations="}, {"true", "false"}},
      {{"-dlcm=", "--def-load-cache="}, {"ca", "cg", "cs", "lu", "cv"}},
      {{"-dscm=", "--def-store-cache="}, {"wb", "cg", "cs", "wt"}}};
  for (const auto& [prefixes, values] : kValued) {
    for (const auto& prefix : prefixes) {
      if (starts_with(t, prefix) && one_of(t.substr(prefix.size()), values)) return kAllowed;
    }
  }
  return std::string();
}

const char* kPtxasSummary =
    "-O0..-O3, -v, --warn-on-spills, --warn-on-local-memory-usage, --allow-expensive-optimizations=true|false, "
    "-dlcm=ca|cg|cs|lu|cv, -dscm=wb|cg|cs|wt";

// "-O3,-v" -> each checked. Returns the refusal message or "".
std::string check_list(const std::string& list, Verdict (*verdict)(const std::string&), const std::string& via,
                       const std::string& allowed) {
  if (list.empty()) return "option \"" + via + "\" needs a value";
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (auto v = verdict(item)) {
      return "option \"" + via + " " + item + "\" is not allowed" + (v->empty() ? "" : ": " + *v) +
             ".\nAllowed after " + via + ": " + allowed;
    }
  }
  return "";
}

// ---- CUDA (shared by nvcc and NVRTC) ----

bool cuda_value_flag(const std::string& t) {
  for (const std::string name : {"ftz", "prec-div", "prec-sqrt", "fmad"}) {
    for (const std::string& prefix : {"--" + name + "=", "-" + name + "="}) {
      if (starts_with(t, prefix) && one_of(t.substr(prefix.size()), {"true", "false"})) return true;
    }
  }
  return false;
}

Verdict cuda_refusal(const std::string& t) {
  if (starts_with(t, "-arch") || starts_with(t, "--gpu-architecture") || starts_with(t, "-gencode") ||
      starts_with(t, "--generate-code") || starts_with(t, "-code") || starts_with(t, "--gpu-code")) {
    return "the target architecture is fixed by the environment";
  }
  if (t == "-G" || t == "--device-debug") return "device debug code is not what gets timed";
  if (t == "-rdc" || starts_with(t, "-rdc=") || starts_with(t, "--relocatable-device-code") || t == "-dc" ||
      t == "-dlto" || t == "--dlink-time-opt" || t == "-dlink") {
    return "separate compilation and device linking are not supported";
  }
  if (starts_with(t, "--default-stream") || starts_with(t, "-default-stream")) {
    return "all GPU work must go on the stream the harness passes";
  }
  if (starts_with(t, "-ccbin") || starts_with(t, "--compiler-bindir")) return "the host compiler is fixed";
  if (starts_with(t, "-Xnvlink") || starts_with(t, "--nvlink-options") || starts_with(t, "-Xarchive")) {
    return "linking is fixed by the environment";
  }
  if (t == "--keep" || t == "-keep" || starts_with(t, "--keep-dir") || starts_with(t, "-odir") || t == "--dryrun" ||
      t == "-dryrun" || starts_with(t, "--output") || t == "-cuda" || t == "-ptx" || t == "-cubin" || t == "-fatbin") {
    return "the output and the compilation steps are managed by the environment";
  }
  return common_refusal(t);
}

class Walker {
 public:
  explicit Walker(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}
  bool done() const { return i_ >= tokens_.size(); }
  const std::string& next() { return tokens_[i_++]; }
  // The value of "-X value" or "-X=value" (or "--long=value").
  std::optional<std::string> value_of(const std::string& t, const std::vector<std::string>& names) {
    for (const auto& name : names) {
      if (t == name) {
        if (done()) return std::string();
        return next();
      }
      if (starts_with(t, name + "=")) return t.substr(name.size() + 1);
    }
    return std::nullopt;
  }

 private:
  std::vector<std::string> tokens_;
  size_t i_ = 0;
};

// Flags nvcc and NVRTC share. Returns true when `t` was handled (allowed and
// appended, or refused with `out->error` set).
bool common_cuda_flag(const std::string& t, Walker& w, CheckedOptions* out, const std::string& compiler,
                      const std::string& allowed) {
  if (auto v = w.value_of(t, {"-maxrregcount", "--maxrregcount"})) {
    if (!is_int_in(*v, 16, 255)) {
      out->error = "option \"" + t + "\" needs a register count from 16 to 255, got \"" + *v + "\"";
    } else {
      out->args.push_back("--maxrregcount=" + *v);
    }
    return true;
  }
  if (auto v = w.value_of(t, {"-Xptxas", "--ptxas-options"})) {
    out->error = check_list(*v, ptxas_verdict, "-Xptxas", kPtxasSummary);
    if (out->error.empty()) out->args.push_back("--ptxas-options=" + *v);
    return true;
  }
  if (auto v = w.value_of(t, {"-D", "--define-macro"})) {
    if (is_macro(*v)) {
      out->args.push_back("-D" + *v);
    } else {
      out->error = refusal(t + " " + *v, "a macro definition is NAME or NAME=VALUE", allowed, compiler);
    }
    return true;
  }
  if (auto v = w.value_of(t, {"-U", "--undefine-macro"})) {
    if (is_identifier(*v)) {
      out->args.push_back("-U" + *v);
    } else {
      out->error = refusal(t + " " + *v, "-U takes a macro name", allowed, compiler);
    }
    return true;
  }
  if ((starts_with(t, "-D") && is_macro(t.substr(2))) || (starts_with(t, "-U") && is_identifier(t.substr(2))) ||
      cuda_value_flag(t)) {
    out->args.push_back(t);
    return true;
  }
  if (starts_with(t, "-std=") || starts_with(t, "--std=")) {
    const std::string v = t.substr(t.find('=') + 1);
    if (one_of(v, {"c++14", "c++17", "c++20"})) {
      out->args.push_back("-std=" + v);
      out->sets_std = true;
    } else {
      out->error = refusal(t, "the C++ dialect must be c++14, c++17 or c++20", allowed, compiler);
    }
    return true;
  }
  return false;
}

}  // namespace

CheckedOptions check_host_options(const std::vector<std::string>& options) {
  CheckedOptions out;
  Walker w(tokenize(options));
  while (!w.done() && out.error.empty()) {
    const std::string t = w.next();
    if (t == "-D" || t == "-U") {
      const std::string v = w.done() ? "" : w.next();
      const Verdict verdict = host_verdict(t + v);
      if (verdict)
        out.error = refusal(t + " " + v, *verdict, host_allowed_summary(), "g++ (mode cpp)");
      else
        out.args.push_back(t + v);
      continue;
    }
    if (auto verdict = host_verdict(t)) {
      out.error = refusal(t, *verdict, host_allowed_summary(), "g++ (mode cpp)");
      break;
    }
    if (starts_with(t, "-std=")) out.sets_std = true;
    out.args.push_back(t);
  }
  if (!out.error.empty()) out.args.clear();
  return out;
}

CheckedOptions check_nvcc_options(const std::vector<std::string>& options) {
  static const std::string kAllowed =
      "-O0..-O3, --use_fast_math, --ftz=true|false, --prec-div=true|false, --prec-sqrt=true|false, "
      "--fmad=true|false, -maxrregcount=N, -lineinfo, --extra-device-vectorization, --expt-relaxed-constexpr, "
      "--extended-lambda, --restrict, -w, -std=c++14|c++17|c++20, -DNAME[=VALUE], -UNAME, "
      "-Xptxas <" +
      std::string(kPtxasSummary) +
      ">, -Xcompiler <host flags: -O0..-O3, -march=native, "
      "-ffast-math, -funroll-loops, ...>";
  static const std::vector<std::string> kExact = {"-O0",
                                                  "-O1",
                                                  "-O2",
                                                  "-O3",
                                                  "--use_fast_math",
                                                  "-use_fast_math",
                                                  "-lineinfo",
                                                  "--generate-line-info",
                                                  "--extra-device-vectorization",
                                                  "-extra-device-vectorization",
                                                  "--expt-relaxed-constexpr",
                                                  "-expt-relaxed-constexpr",
                                                  "--extended-lambda",
                                                  "-extended-lambda",
                                                  "--expt-extended-lambda",
                                                  "-expt-extended-lambda",
                                                  "--restrict",
                                                  "-restrict",
                                                  "-w",
                                                  "--disable-warnings",
                                                  "--resource-usage",
                                                  "-res-usage",
                                                  "-Wno-deprecated-gpu-targets"};
  CheckedOptions out;
  Walker w(tokenize(options));
  while (!w.done() && out.error.empty()) {
    const std::string t = w.next();
    if (one_of(t, kExact)) {
      out.args.push_back(t);
      out.sets_opt_level = out.sets_opt_level || one_of(t, {"-O0", "-O1", "-O2", "-O3"});
      continue;
    }
    if (auto v = w.value_of(t, {"-Xcompiler", "--compiler-options"})) {
      out.error = check_list(*v, host_verdict, "-Xcompiler", host_allowed_summary());
      if (out.error.empty()) out.args.push_back("--compiler-options=" + *v);
      continue;
    }
    if (common_cuda_flag(t, w, &out, "nvcc (mode cuda)", kAllowed)) continue;
    const Verdict reason = cuda_refusal(t);
    out.error = refusal(t, reason ? *reason : "", kAllowed, "nvcc (mode cuda)");
  }
  if (!out.error.empty()) out.args.clear();
  return out;
}

CheckedOptions check_nvrtc_options(const std::vector<std::string>& options) {
  static const std::string kAllowed =
      "--use_fast_math, --ftz=true|false, --prec-div=true|false, --prec-sqrt=true|false, --fmad=true|false, "
      "-maxrregcount=N, -lineinfo, --extra-device-vectorization, --restrict, -w, -std=c++14|c++17|c++20, "
      "-DNAME[=VALUE], -UNAME, -Xptxas=<" +
      std::string(kPtxasSummary) + ">";
  static const std::vector<std::string> kExact = {"--use_fast_math",
                                                  "-use_fast_math",
                                                  "-lineinfo",
                                                  "--generate-line-info",
                                                  "--extra-device-vectorization",
                                                  "-extra-device-vectorization",
                                                  "--restrict",
                                                  "-restrict",
                                                  "-w",
                                                  "--disable-warnings"};
  CheckedOptions out;
  Walker w(tokenize(options));
  while (!w.done() && out.error.empty()) {
    const std::string t = w.next();
    if (one_of(t, kExact)) {
      out.args.push_back(t);
      continue;
    }
    if (common_cuda_flag(t, w, &out, "NVRTC (mode nvrtc)", kAllowed)) continue;
    Verdict reason = cuda_refusal(t);
    if (!reason && starts_with(t, "-O")) {
      reason = "NVRTC has no -O flag (device code is always optimized); -Xptxas=-O3 sets the ptxas level";
    }
    out.error = refusal(t, reason ? *reason : "", kAllowed, "NVRTC (mode nvrtc)");
  }
  if (!out.error.empty()) out.args.clear();
  return out;
}

}  // namespace kforge::env
