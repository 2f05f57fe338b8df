#include "kforge/data_synth/contamination.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "kforge/core/error.h"
#include "kforge/core/number_text.h"
#include "kforge/data_synth/graph_hash.h"

namespace kforge::synth {
namespace {

// Scalar and bias epilogues keep a mark while composites are fused (x + 3 in
// hardswish, 1 + |x| in softsign), then leave the core.
constexpr char kEpilogueAdd[] = "add~";
constexpr char kEpilogueMul[] = "mul~";

bool is_layout(const std::string& op) {
  static const std::set<std::string> kLayout = {"contiguous", "reshape",   "flatten", "transpose", "permute",
                                                "squeeze",    "unsqueeze", "expand",  "view",      "narrow",
                                                "slice",      "repeat",    "dropout", "identity"};
  return kLayout.count(op) > 0;
}

// The token of one marked op before composites are fused ("" drops it).
std::string first_token(const std::string& marked) {
  const size_t at = marked.find('@');
  const std::string op = marked.substr(0, at);
  const bool epilogue = at != std::string::npos;  // @scalar or @bias
  if (is_layout(op)) return "";
  static const std::map<std::string, std::string> kAlias = {
      {"matmul", "gemm"},
      {"linear", "gemm"},
      {"bmm", "gemm"},
      {"sub", "add"},
      {"div", "mul"},
      {"clamp", "clamp"},
      {"hardtanh", "clamp"},
      {"relu6", "clamp"},
      {"amax", "max"},
      {"amin", "min"},
      {"clamp_min", "clamp"},
      {"clamp_max", "clamp"},
      // An adaptive pool is the pool of that kind with the window its output
      // size implies: by meaning, KernelBench's Average/Max_Pooling problems.
      {"adaptive_avg_pool1d", "avg_pool1d"},
      {"adaptive_avg_pool2d", "avg_pool2d"},
      {"adaptive_avg_pool3d", "avg_pool3d"},
      {"adaptive_max_pool1d", "max_pool1d"},
      {"adaptive_max_pool2d", "max_pool2d"},
      {"adaptive_max_pool3d", "max_pool3d"},
  };
  std::string base = op;
  if (auto it = kAlias.find(op); it != kAlias.end()) base = it->second;
  if (epilogue) {
    if (base == "add") return kEpilogueAdd;
    if (base == "mul") return kEpilogueMul;
    // min/max against a scalar or a parameter bound the value: a clamp.
    if (base == "min" || base == "max" || base == "minimum" || base == "maximum") return "clamp";
  }
  return base;
}

using Tokens = std::vector<std::string>;

bool at(const Tokens& t, size_t i, const char* token) { return i < t.size() && t[i] == token; }

// Replaces t[begin, end) by `name`.
void fuse(Tokens& t, size_t begin, size_t end, const std::string& name) {
  t.erase(t.begin() + static_cast<std::ptrdiff_t>(begin), t.begin() + static_cast<std::ptrdiff_t>(end));
  t.insert(t.begin() + static_cast<std::ptrdiff_t>(begin), name);
}

// A literal pattern: returns the end of the match at i, or 0.
size_t match(const Tokens& t, size_t i, const std::vector<const char*>& pattern) {
  for (size_t k = 0; k < pattern.size(); ++k) {
    if (!at(t, i + k, pattern[k])) return 0;
  }
  return i + pattern.size();
}

// tanh-GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): a pow, then
// only arithmetic, a tanh, an optional "1 +", and the product with x.
size_t match_tanh_gelu(const Tokens& t, size_t i, size_t* begin) {
  if (!at(t, i, "pow")) return 0;
  *begin = i > 0 && t[i - 1] == kEpilogueMul ? i - 1 : i;
  size_t j = i + 1;
  while (j < t.size() && (t[j] == "add" || t[j] == "mul" || t[j] == kEpilogueAdd || t[j] == kEpilogueMul)) ++j;
  if (!at(t, j, "tanh")) return 0;
  ++j;
  if (at(t, j, kEpilogueAdd)) ++j;
  if (!at(t, j, "mul")) return 0;
  ++j;
  while (at(t, j, kEpilogueMul)) ++j;
  return j;
}

// Hand-written composites, fused in this order (longer first: hardswish's
// sigmoid form would otherwise read as silu).
void fuse_composites(Tokens& t) {
  for (size_t i = 0; i < t.size(); ++i) {
    size_t begin = i;
    if (const size_t end = match_tanh_gelu(t, i, &begin)) fuse(t, begin, end, "gelu");
  }
  struct Pattern {
    std::vector<const char*> tokens;
    const char* name;
  };
  static const std::vector<Pattern> kPatterns = {
      // x / sqrt(mean(x^2) + eps), or times its rsqrt
      {{"pow", "mean", kEpilogueAdd, "sqrt", "mul"}, "rms_norm"},
      {{"pow", "mean", kEpilogueAdd, "rsqrt", "mul"}, "rms_norm"},
      {{"pow", "mean", "sqrt", "mul"}, "rms_norm"},
      {{"pow", "mean", "rsqrt", "mul"}, "rms_norm"},
      // x * relu6(x + 3) / 6, and the sigmoid form KernelBench also calls hardswish
      {{kEpilogueAdd, "clamp", "mul", kEpilogueMul}, "hardswish"},
      {{kEpilogueAdd, "clamp", kEpilogueMul, "mul"}, "hardswish"},
      {{kEpilogueAdd, "sigmoid", "mul", kEpilogueMul}, "hardswish"},
      {{"softplus", "tanh", "mul"}, "mish"},       // x * tanh(softplus(x))
      {{"abs", kEpilogueAdd, "mul"}, "softsign"},  // x / (1 + |x|)
      {{"sigmoid", "mul"}, "silu"},                // x * sigmoid(x)
  };
  for (const Pattern& p : kPatterns) {
    for (size_t i = 0; i < t.size(); ++i) {
      if (const size_t end = match(t, i, p.tokens)) fuse(t, i, end, p.name);
    }
  }
}

std::string join(const Tokens& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.size(); ++i) s += (i ? ", " : "") + t[i];
  return s + "]";
}

size_t common_tokens(Tokens a, Tokens b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  Tokens both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return both.size();
}

}  // namespace

json NearestProblem::to_json() const {
  return {{"problem", problem},     {"distance", distance},         {"relation", relation},
          {"task_core", task_core}, {"problem_core", problem_core}, {"why", why}};
}

std::string contamination_op(const TaskSpec& task, const GraphNode& n) {
  static const std::set<std::string> kEpilogueOps = {"add", "sub", "mul", "div", "minimum", "maximum", "pow"};
  if (!kEpilogueOps.count(n.op)) return n.op;
  if (n.in.size() == 1) return n.op + "@scalar";  // the other operand is an attr
  for (const auto& v : n.in) {
    for (const auto& p : task.params) {
      if (p.name == v) return n.op + "@bias";
    }
  }
  return n.op;
}

std::vector<std::string> contamination_ops(const TaskSpec& task) {
  std::vector<std::string> ops;
  for (size_t i : canonical_node_order(task)) ops.push_back(contamination_op(task, task.nodes[i]));
  return ops;
}

std::vector<std::string> contamination_core(const std::vector<std::string>& marked_ops) {
  Tokens t;
  for (const auto& op : marked_ops) {
    std::string token = first_token(op);
    if (!token.empty()) t.push_back(std::move(token));
  }
  fuse_composites(t);
  Tokens core;
  for (auto& token : t) {
    if (token == kEpilogueAdd || token == kEpilogueMul) continue;
    // clamp after clamp is one clamp (the bounds intersect).
    if (token == "clamp" && !core.empty() && core.back() == "clamp") continue;
    core.push_back(std::move(token));
  }
  return core;
}

double sequence_distance(const std::vector<std::string>& a, const std::vector<std::string>& b, std::string* relation) {
  if (relation) *relation = "edit";
  if (a == b) {
    if (relation) *relation = "equal";
    return 0.0;
  }
  if (b.size() >= 2 && std::search(a.begin(), a.end(), b.begin(), b.end()) != a.end()) {
    if (relation) *relation = "contains";
    return 0.0;
  }
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  const double d = static_cast<double>(prev[b.size()]) / static_cast<double>(std::max(a.size(), b.size()));
  if (relation && d >= 1.0) *relation = "disjoint";
  return d;
}

KernelBenchSignatures KernelBenchSignatures::from_json(const json& root, const std::string& source) {
  const Document doc = Document::from_value(root, source);
  ObjectReader r = doc.root_object();
  r.allow("format");
  r.allow("generated_by");
  r.allow("normalization");
  r.allow("summary");
  KernelBenchSignatures s;
  const std::vector<Field> problems = r.required("problems").as_array();
  if (problems.size() > 100000) r.self().fail_message("more than 100000 problems: not a signature file");
  for (const Field& f : problems) {
    ObjectReader p = f.as_object();
    KernelBenchSignature sig;
    sig.name = p.required("name").as_string();
    sig.ops = p.required("ops").as_string_list();
    if (sig.ops.size() > 100000) f.fail_message("more than 100000 ops");
    if (auto level = p.optional("level")) sig.level = static_cast<int>(level->as_int_in(0, 100));
    p.allow("inputs");
    p.allow("traced");
    p.allow("importable");
    p.allow("unsupported");
    p.finish();
    sig.core = contamination_core(sig.ops);
    // A problem of only scalar arithmetic (x * s) has an empty core: it
    // matches tasks that are nothing more. One with no ops at all (it could
    // not be built) matches nothing.
    if (!sig.ops.empty()) s.problems_.push_back(std::move(sig));
  }
  return s;
}

KernelBenchSignatures KernelBenchSignatures::load(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(path.string() + ": cannot read the KernelBench signature file (" + ec.message() + ")");
  if (size > (64u << 20)) throw InputError(path.string() + ": over 64 MiB, not a signature file");
  const Document doc = Document::from_file(path);
  return from_json(doc.root, path.string());
}

NearestProblem KernelBenchSignatures::nearest(const std::vector<std::string>& task_marked_ops) const {
  const Tokens core = contamination_core(task_marked_ops);
  NearestProblem best;
  best.task_core = core;
  std::tuple<double, long, int, std::string> best_key{2.0, 0, 0, ""};
  for (const auto& p : problems_) {
    std::string relation;
    const double d = sequence_distance(core, p.core, &relation);
    const std::tuple<double, long, int, std::string> key{d, -static_cast<long>(common_tokens(core, p.core)), p.level,
                                                         p.name};
    if (best.problem.empty() || key < best_key) {
      best_key = key;
      best.problem = p.name;
      best.distance = d;
      best.relation = relation;
      best.problem_core = p.core;
    }
  }
  if (best.problem.empty()) return best;
  const bool rejected = best.distance <= kContaminationThreshold;
  std::string how;
  if (best.relation == "equal") {
    how = "the cores are equal";
  } else if (best.relation == "contains") {
    how = "the task's core contains the problem's";
  } else {
    how = "distance " + format_significant(best.distance, 2) + (rejected ? " <= " : " > ") +
          format_significant(kContaminationThreshold, 2);
  }
  best.why = std::string(rejected ? "contaminated: " : "passed: ") + "core " + join(core) + " vs " + best.problem +
             " " + join(best.problem_core) + ": " + how;
  return best;
}

std::filesystem::path default_signature_path() {
#ifdef KFORGE_SOURCE_DIR
  return std::filesystem::path(KFORGE_SOURCE_DIR) / "data_synth" / "signatures" / "kernelbench_signatures.json";
#else
  return "data_synth/signatures/kernelbench_signatures.json";
#endif
}

}  // namespace kforge::synth
