#include "kforge/data_synth/contamination.h"

#include <algorithm>
#include <map>
#include <set>

#include "kforge/core/error.h"

namespace kforge::synth {

json NearestProblem::to_json() const { return {{"problem", problem}, {"distance", distance}, {"relation", relation}}; }

std::string contamination_token(const std::string& op) {
  static const std::set<std::string> kLayout = {"contiguous", "reshape", "flatten", "transpose", "permute", "squeeze",
                                                "unsqueeze",  "expand",  "view",    "narrow",    "slice",   "repeat"};
  static const std::map<std::string, std::string> kAlias = {
      {"matmul", "gemm"},    {"linear", "gemm"}, {"bmm", "gemm"}, {"sub", "add"},  {"div", "mul"},
      {"hardtanh", "clamp"}, {"relu6", "clamp"}, {"amax", "max"}, {"amin", "min"},
  };
  if (kLayout.count(op)) return "";
  auto it = kAlias.find(op);
  return it == kAlias.end() ? op : it->second;
}

std::vector<std::string> contamination_tokens(const std::vector<std::string>& ops) {
  std::vector<std::string> out;
  for (const auto& op : ops) {
    std::string t = contamination_token(op);
    if (!t.empty()) out.push_back(std::move(t));
  }
  return out;
}

double sequence_distance(const std::vector<std::string>& a, const std::vector<std::string>& b, std::string* relation) {
  if (relation) *relation = "edit";
  if (a.empty() && b.empty()) return 0.0;
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
  return static_cast<double>(prev[b.size()]) / static_cast<double>(std::max(a.size(), b.size()));
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
    p.allow("inputs");
    p.allow("level");
    p.allow("traced");
    p.allow("importable");
    p.allow("unsupported");
    p.finish();
    sig.tokens = contamination_tokens(sig.ops);
    if (!sig.tokens.empty()) s.problems_.push_back(std::move(sig));
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

NearestProblem KernelBenchSignatures::nearest(const std::vector<std::string>& task_ops) const {
  const std::vector<std::string> tokens = contamination_tokens(task_ops);
  NearestProblem best;
  for (const auto& p : problems_) {
    std::string relation;
    const double d = sequence_distance(tokens, p.tokens, &relation);
    if (best.problem.empty() || d < best.distance) {
      best.problem = p.name;
      best.distance = d;
      best.relation = relation;
    }
  }
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
