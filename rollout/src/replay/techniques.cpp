#include "kforge/rollout/replay/techniques.h"

#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"
#include "kforge/env/analysis.h"
#include "kforge/env/compile/compilers.h"

namespace kforge::rollout::replay {
namespace {

namespace fs = std::filesystem;

// How a pattern must sit in the code: a whole identifier, an identifier
// prefix (`__shfl_` for every shuffle), or any substring (PTX in asm strings).
enum class Match { kWord, kPrefix, kRaw };

struct Pattern {
  const char* text;
  Match match;
};

struct Rule {
  const char* technique;
  bool cuda;  // applies to CUDA modes (cuda, nvrtc, torch_ext)
  bool cpp;   // applies to host C++
  std::vector<Pattern> patterns;
};

// Where the data lives and how it moves: shared memory, wide loads and
// stores, asynchronous and bulk copies, the read-only cache.
std::vector<Rule> memory_rules() {
  return {
      {"shared_memory", true, false, {{"__shared__", Match::kWord}}},
      {"vectorized_access",
       true,
       false,
       {{"float4", Match::kWord},
        {"float2", Match::kWord},
        {"int4", Match::kWord},
        {"int2", Match::kWord},
        {"uint4", Match::kWord},
        {"uint2", Match::kWord},
        {"double2", Match::kWord},
        {"half2", Match::kWord},
        {"__half2", Match::kWord},
        {"__nv_bfloat162", Match::kWord},
        {"ld.global.v2", Match::kRaw},
        {"ld.global.v4", Match::kRaw},
        {"st.global.v4", Match::kRaw},
        {"ld.global.nc.v4", Match::kRaw}}},
      {"async_copy",
       true,
       false,
       {{"cp.async.ca", Match::kRaw},
        {"cp.async.cg", Match::kRaw},
        {"__pipeline_memcpy_async", Match::kWord},
        {"memcpy_async", Match::kWord},
        {"cp_async", Match::kPrefix}}},
      {"tma",
       true,
       false,
       {{"cp.async.bulk", Match::kRaw}, {"CUtensorMap", Match::kWord}, {"cuTensorMapEncode", Match::kPrefix}}},
      {"read_only_cache", true, false, {{"__ldg", Match::kWord}, {"ld.global.nc", Match::kRaw}}},
  };
}

// Work across a warp: shuffles and reductions, matrix instructions.
std::vector<Rule> warp_and_tensor_core_rules() {
  return {
      {"warp_shuffle",
       true,
       false,
       {{"__shfl_", Match::kPrefix},
        {"__reduce_", Match::kPrefix},
        {"shfl.sync", Match::kRaw},
        {"redux.sync", Match::kRaw}}},
      {"tensor_cores",
       true,
       false,
       {{"wmma", Match::kWord},
        {"mma_sync", Match::kWord},
        {"mma.sync", Match::kRaw},
        {"wgmma.", Match::kRaw},
        {"__hmma", Match::kPrefix},
        {"tcgen05.mma", Match::kRaw}}},
      {"wgmma", true, false, {{"wgmma.mma_async", Match::kRaw}}},
  };
}

// How the instructions are chosen, on either side: unrolled loops, atomics,
// approximate math.
std::vector<Rule> instruction_rules() {
  return {
      {"unrolling",
       true,
       true,
       {{"#pragma unroll", Match::kRaw},
        {"#pragma GCC unroll", Match::kRaw},
        {"#pragma clang loop unroll", Match::kRaw}}},
      {"atomics",
       true,
       true,
       {{"atomicAdd", Match::kWord},
        {"atomicMax", Match::kWord},
        {"atomicMin", Match::kWord},
        {"atomicCAS", Match::kWord},
        {"atomicExch", Match::kWord},
        {"red.global", Match::kRaw},
        {"atom.global", Match::kRaw},
        {"std::atomic", Match::kRaw}}},
      {"fast_math",
       true,
       false,
       {{"__expf", Match::kWord},
        {"__logf", Match::kWord},
        {"__sinf", Match::kWord},
        {"__cosf", Match::kWord},
        {"__powf", Match::kWord},
        {"__fdividef", Match::kWord},
        {"__tanhf", Match::kWord},
        {"ex2.approx", Match::kRaw},
        {"tanh.approx", Match::kRaw}}},
  };
}

// Host C++ using the CPU's width and cores.
std::vector<Rule> host_parallelism_rules() {
  return {
      {"simd",
       false,
       true,
       {{"__m128", Match::kPrefix},
        {"__m256", Match::kPrefix},
        {"__m512", Match::kPrefix},
        {"_mm_", Match::kPrefix},
        {"_mm256_", Match::kPrefix},
        {"_mm512_", Match::kPrefix},
        {"#pragma omp simd", Match::kRaw},
        {"#pragma GCC ivdep", Match::kRaw},
        {"vector_size", Match::kWord}}},
      {"multithreading",
       false,
       true,
       {{"std::thread", Match::kRaw},
        {"std::async", Match::kRaw},
        {"#pragma omp parallel", Match::kRaw},
        {"pthread_create", Match::kWord}}},
  };
}

// Calls into NVIDIA's libraries instead of a kernel of one's own.
std::vector<Rule> vendor_library_rules() {
  return {
      {"vendor_library",
       true,
       false,
       {{"cublas", Match::kPrefix},
        {"cublasLt", Match::kPrefix},
        {"cudnn", Match::kPrefix},
        {"cutlass", Match::kWord},
        {"cute", Match::kWord}}},
  };
}

// Every rule, family by family; a report lists its techniques in the order
// of technique_names(), whatever the order of the rules.
const std::vector<Rule>& source_rules() {
  static const std::vector<Rule> kRules = [] {
    std::vector<Rule> rules;
    for (const auto family :
         {memory_rules, warp_and_tensor_core_rules, instruction_rules, host_parallelism_rules, vendor_library_rules}) {
      const std::vector<Rule> more = family();
      rules.insert(rules.end(), more.begin(), more.end());
    }
    return rules;
  }();
  return kRules;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Occurrences of `p` in `code`, counting at most `cap`.
int count_matches(const std::string& code, const Pattern& p, int cap = 1000) {
  const std::string text = p.text;
  int n = 0;
  for (size_t pos = code.find(text); pos != std::string::npos && n < cap; pos = code.find(text, pos + 1)) {
    if (p.match != Match::kRaw) {
      if (pos > 0 && ident_char(code[pos - 1]) && ident_char(text.front())) continue;
      const size_t end = pos + text.size();
      if (p.match == Match::kWord && end < code.size() && ident_char(code[end]) && ident_char(text.back())) continue;
    }
    ++n;
  }
  return n;
}

// The code without comments; string and character literals are kept (inline
// PTX lives in asm strings) but cannot open a comment.
std::string strip_comments(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  enum { kCode, kLine, kBlock, kString, kChar } state = kCode;
  for (size_t i = 0; i < src.size(); ++i) {
    const char c = src[i];
    const char next = i + 1 < src.size() ? src[i + 1] : '\0';
    switch (state) {
      case kCode:
        if (c == '/' && next == '/') {
          state = kLine;
          ++i;
        } else if (c == '/' && next == '*') {
          state = kBlock;
          ++i;
          out.push_back(' ');
        } else {
          if (c == '"') state = kString;
          if (c == '\'') state = kChar;
          out.push_back(c);
        }
        break;
      case kLine:
        if (c == '\n') {
          state = kCode;
          out.push_back('\n');
        }
        break;
      case kBlock:
        if (c == '*' && next == '/') {
          state = kCode;
          ++i;
        } else if (c == '\n') {
          out.push_back('\n');
        }
        break;
      case kString:
      case kChar:
        out.push_back(c);
        if (c == '\\' && i + 1 < src.size()) {
          out.push_back(src[++i]);
        } else if ((state == kString && c == '"') || (state == kChar && c == '\'') || c == '\n') {
          state = kCode;
        }
        break;
    }
  }
  return out;
}

bool is_cuda_mode(SolutionMode m) { return m != SolutionMode::kCpp; }

void add(TechniqueReport* r, const std::string& name, const std::string& evidence) {
  auto it = std::find_if(r->found.begin(), r->found.end(), [&](const auto& f) { return f.name == name; });
  if (it == r->found.end()) {
    r->found.push_back({name, {}});
    it = r->found.end() - 1;
  }
  if (it->evidence.size() < 4 && std::find(it->evidence.begin(), it->evidence.end(), evidence) == it->evidence.end()) {
    it->evidence.push_back(evidence);
  }
}

void sort_by_vocabulary(TechniqueReport* r) {
  const auto& names = technique_names();
  auto rank = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  std::stable_sort(r->found.begin(), r->found.end(),
                   [&](const auto& a, const auto& b) { return rank(a.name) < rank(b.name); });
}

std::string times(int64_t n) { return " x" + std::to_string(n); }

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kforge-replay-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw SystemError("cannot create a temporary directory");
    path_ = pattern;
  }
  ~TempDir() { kforge::remove_tree(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

const std::vector<std::string>& technique_names() {
  static const std::vector<std::string> kNames = {
      "shared_memory", "vectorized_access", "warp_shuffle",  "tensor_cores", "wgmma",           "async_copy",
      "tma",           "unrolling",         "fusion",        "atomics",      "read_only_cache", "fast_math",
      "simd",          "multithreading",    "vendor_library"};
  return kNames;
}

bool TechniqueReport::has(const std::string& name) const {
  return std::any_of(found.begin(), found.end(), [&](const auto& f) { return f.name == name; });
}

std::vector<std::string> TechniqueReport::names() const {
  std::vector<std::string> out;
  for (const auto& f : found) out.push_back(f.name);
  return out;
}

TechniqueReport techniques_from_source(const Solution& solution, const TaskSpec* task) {
  TechniqueReport r;
  const std::string code = strip_comments(solution.source);
  const bool cuda = is_cuda_mode(solution.mode);
  for (const Rule& rule : source_rules()) {
    if (cuda ? !rule.cuda : !rule.cpp) continue;
    for (const Pattern& p : rule.patterns) {
      const int n = count_matches(code, p);
      if (n > 0) add(&r, rule.technique, std::string("source: ") + p.text + (n > 1 ? times(n) : ""));
    }
  }
  for (const auto& option : solution.options) {
    if (cuda && (option == "-use_fast_math" || option == "--use_fast_math")) add(&r, "fast_math", "option: " + option);
  }
  const int ops = task == nullptr ? 0 : static_cast<int>(task->nodes.size());
  if (ops >= 2) {
    if (cuda) {
      const int kernels = count_matches(code, {"__global__", Match::kWord});
      if (kernels >= 1 && kernels < ops) {
        add(&r, "fusion",
            "source: " + std::to_string(ops) + " graph ops in " + std::to_string(kernels) +
                (kernels == 1 ? " kernel" : " kernels"));
      }
    } else {
      bool allocates = false;
      for (const char* a : {"malloc", "calloc", "aligned_alloc", "new", "vector", "make_unique", "posix_memalign"}) {
        allocates = allocates || count_matches(code, {a, Match::kWord}) > 0;
      }
      if (!allocates) {
        add(&r, "fusion", "source: " + std::to_string(ops) + " graph ops without intermediate buffers");
      }
    }
  }
  sort_by_vocabulary(&r);
  return r;
}

void add_sass_evidence(const json& facts, TechniqueReport* r) {
  const json* kernels = facts.is_object() && facts.contains("kernels") ? &facts["kernels"] : nullptr;
  if (kernels == nullptr || !kernels->is_array()) return;
  std::map<std::string, int64_t> cls, op;
  std::map<std::string, std::map<std::string, int64_t>> bits;
  std::set<std::string> tensor, constant_loads;
  for (const auto& k : *kernels) {
    if (!k.is_object()) continue;
    if (k.contains("by_class") && k["by_class"].is_object()) {
      for (const auto& [name, n] : k["by_class"].items()) cls[name] += n.is_number_integer() ? n.get<int64_t>() : 0;
    }
    if (k.contains("by_opcode") && k["by_opcode"].is_object()) {
      for (const auto& [name, n] : k["by_opcode"].items()) op[name] += n.is_number_integer() ? n.get<int64_t>() : 0;
    }
    if (k.contains("access_bits") && k["access_bits"].is_object()) {
      for (const auto& [c, hist] : k["access_bits"].items()) {
        if (!hist.is_object()) continue;
        for (const auto& [b, n] : hist.items()) bits[c][b] += n.is_number_integer() ? n.get<int64_t>() : 0;
      }
    }
    if (k.contains("tensor_mnemonics") && k["tensor_mnemonics"].is_object()) {
      for (const auto& [m, n] : k["tensor_mnemonics"].items()) tensor.insert(m);
    }
    if (k.contains("top_mnemonics") && k["top_mnemonics"].is_array()) {
      for (const auto& m : k["top_mnemonics"]) {
        const std::string name = m.is_object() ? m.value("mnemonic", std::string()) : std::string();
        if (name.rfind("LDG", 0) == 0 && name.find(".CONSTANT") != std::string::npos) constant_loads.insert(name);
      }
    }
  }
  auto total = [&](std::initializer_list<const char*> names, const std::map<std::string, int64_t>& m) {
    int64_t n = 0;
    for (const char* name : names) {
      auto it = m.find(name);
      if (it != m.end()) n += it->second;
    }
    return n;
  };
  if (int64_t n = total({"shared_load", "shared_store"}, cls); n > 0) {
    add(r, "shared_memory", "sass: LDS/STS" + times(n));
  }
  for (const char* c : {"global_load", "global_store"}) {
    for (const auto& [b, n] : bits[c]) {
      if (std::atoi(b.c_str()) >= 64 && n > 0) {
        add(r, "vectorized_access",
            std::string("sass: ") + (std::string(c) == "global_load" ? "LDG" : "STG") + " " + b + "-bit" + times(n));
      }
    }
  }
  for (const char* o : {"SHFL", "REDUX"}) {
    if (int64_t n = total({o}, op); n > 0) add(r, "warp_shuffle", std::string("sass: ") + o + times(n));
  }
  if (int64_t n = total({"tensor"}, cls); n > 0) {
    std::string list;
    for (const auto& m : tensor) list += (list.empty() ? "" : ", ") + m;
    add(r, "tensor_cores", "sass: " + (list.empty() ? std::string("tensor-core instructions") : list) + times(n));
  }
  if (int64_t n = total({"HGMMA", "QGMMA", "IGMMA", "BGMMA"}, op); n > 0) add(r, "wgmma", "sass: HGMMA" + times(n));
  if (int64_t n = total({"async_copy"}, cls); n > 0) add(r, "async_copy", "sass: LDGSTS" + times(n));
  if (int64_t n = total({"tma"}, cls); n > 0) add(r, "tma", "sass: UTMALDG/UBLKCP" + times(n));
  if (int64_t n = total({"global_atomic", "shared_atomic"}, cls); n > 0) add(r, "atomics", "sass: ATOM/RED" + times(n));
  for (const auto& m : constant_loads) add(r, "read_only_cache", "sass: " + m);
  r->sass_read = true;
  sort_by_vocabulary(r);
}

TechniqueReport find_techniques(const Solution& solution, const TaskSpec* task, const TechniqueOptions& options) {
  TechniqueReport r = techniques_from_source(solution, task);
  if (!is_cuda_mode(solution.mode)) return r;
  if (!options.read_sass) {
    r.sass_note = "SASS not read (disabled)";
    return r;
  }
  if (solution.mode == SolutionMode::kTorchExt) {
    r.sass_note = "SASS not read: torch_ext builds take minutes";
    return r;
  }
  const env::AnalysisConfig tools;
  const bool cubin = solution.mode == SolutionMode::kNvrtc;
  if (!env::find_cuda_binary_tool(cubin ? "nvdisasm" : "cuobjdump", tools) &&
      !env::find_cuda_binary_tool("cuobjdump", tools)) {
    r.sass_note = std::string("SASS not read: ") + (cubin ? "nvdisasm" : "cuobjdump") + " not found on this machine";
    return r;
  }
  try {
    std::unique_ptr<env::Compiler> compiler = cubin ? env::make_nvrtc_compiler() : env::make_nvcc_compiler();
    env::CompileContext ctx;
    ctx.arch = options.arch;
    ctx.timeout_s = options.compile_timeout_s;
    if (task != nullptr) ctx = env::compile_context_for(*task, ctx);
    TempDir dir;
    const env::CompileResult built = compiler->compile(solution, ctx, dir.path());
    if (!built.ok) {
      r.sass_note = "SASS not read: the solution does not compile here (" +
                    built.diagnostics.substr(0, std::min<size_t>(built.diagnostics.size(), 200)) + ")";
      return r;
    }
    env::AnalysisInput input;
    input.task = task;
    input.solution = &solution;
    input.artifact = &built.artifact;
    input.device.arch = options.arch;
    const env::AnalysisResult mix = env::AnalysisRegistry::global().run("sass_mix", input);
    if (!mix.ok) {
      r.sass_note = "SASS not read: " + mix.error;
      return r;
    }
    add_sass_evidence(mix.facts, &r);
  } catch (const std::exception& e) {
    r.sass_note = std::string("SASS not read: ") + e.what();
  }
  return r;
}

json to_json(const TechniqueReport& report) {
  json found = json::array();
  for (const auto& f : report.found) found.push_back({{"name", f.name}, {"evidence", f.evidence}});
  json j = {{"techniques", found}, {"sass_read", report.sass_read}};
  if (!report.sass_note.empty()) j["sass_note"] = report.sass_note;
  return j;
}

}  // namespace kforge::rollout::replay
