// sass_mix: the static SASS instruction mix per kernel (cuobjdump -sass, or
// nvdisasm for a CUBIN), with hints about what the compiler did not do.
#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "cuda_tools.h"
#include "kforge/env/analysis.h"
#include "kforge/env/analysis/sass.h"
#include "tool_util.h"

namespace kforge::env {
namespace {

using internal::args_document;
using internal::display_name;
using internal::format_percent;
using internal::join;
using internal::kernel_parameter_schema;
using internal::require_artifact;
using internal::run_cuda_tool;
using internal::select_kernels;
using internal::task_is_matmul_like;
using internal::task_uses_float64;
using internal::ToolUnavailable;

constexpr size_t kDefaultTop = 10;
constexpr size_t kMaxHints = 10;

struct Args {
  std::optional<std::string> kernel;
  size_t top = kDefaultTop;
};

Args parse_args(const json& args) {
  const Document doc = args_document("sass_mix", args);
  ObjectReader r = doc.root_object();
  Args a;
  if (auto f = r.optional("kernel")) a.kernel = f->as_string();
  if (auto f = r.optional("top")) a.top = static_cast<size_t>(f->as_int_in(1, 50));
  r.finish();
  return a;
}

struct Listing {
  std::string tool;
  std::string text;
};

Listing disassemble(const AnalysisInput& input) {
  const Artifact& artifact = require_artifact(input);
  try {
    return {"cuobjdump -sass", run_cuda_tool("cuobjdump", {"-sass"}, artifact.path, input.config)};
  } catch (const ToolUnavailable& e) {
    if (artifact.path.extension() == ".cubin") {
      try {
        return {"nvdisasm", run_cuda_tool("nvdisasm", {"-c"}, artifact.path, input.config)};
      } catch (const ToolUnavailable& e2) {
        throw ToolUnavailable(std::string("SASS is not available: ") + e.what() + "; " + e2.what());
      }
    }
    throw ToolUnavailable(std::string("SASS is not available: ") + e.what());
  }
}

std::string base_arch(std::string arch) {
  while (arch.size() > 3 && std::isalpha(static_cast<unsigned char>(arch.back()))) arch.pop_back();
  return arch;
}

// The device runs the code for its own arch; a fat binary lists every target.
std::vector<SassFunction> keep_device_arch(std::vector<SassFunction> fns, const std::string& arch) {
  std::set<std::string> archs;
  for (const auto& f : fns) archs.insert(f.arch);
  if (archs.size() <= 1) return fns;
  for (const std::string& wanted : {arch, base_arch(arch)}) {
    if (!archs.count(wanted)) continue;
    std::vector<SassFunction> out;
    for (auto& f : fns) {
      if (f.arch == wanted) out.push_back(std::move(f));
    }
    return out;
  }
  return fns;
}

int64_t count_bits(const SassMix& m, const std::string& cls, int lo, int hi) {
  auto it = m.access_bits.find(cls);
  if (it == m.access_bits.end()) return 0;
  int64_t n = 0;
  for (const auto& [bits, count] : it->second) {
    if (bits >= lo && bits <= hi) n += count;
  }
  return n;
}

bool has_f64_conversion(const SassMix& m) {
  for (const auto& [mnemonic, n] : m.by_mnemonic) {
    const std::string base = mnemonic.substr(0, mnemonic.find('.'));
    if ((base == "F2F" || base == "I2F" || base == "F2I") && mnemonic.find(".F64") != std::string::npos) return true;
  }
  return false;
}

std::string class_summary(const SassMix& m) {
  std::vector<std::pair<std::string, int64_t>> cls(m.by_class.begin(), m.by_class.end());
  std::stable_sort(cls.begin(), cls.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> parts;
  for (const auto& [name, n] : cls) {
    std::string p = name + " " + std::to_string(n);
    auto bits = m.access_bits.find(name);
    if (bits != m.access_bits.end()) {
      std::vector<std::string> widths;
      for (const auto& [b, c] : bits->second) widths.push_back(std::to_string(b) + "-bit x" + std::to_string(c));
      p += " (" + join(widths) + ")";
    }
    parts.push_back(p);
  }
  return join(parts);
}

std::string describe(const SassMix& m, size_t top) {
  std::string s = display_name(m.name) + (m.arch.empty() ? "" : " [" + m.arch + "]") + ": " +
                  std::to_string(m.instructions) + " instructions";
  if (m.instructions == 0) return s;
  s += " | " + class_summary(m);
  std::vector<std::pair<std::string, int64_t>> mn(m.by_mnemonic.begin(), m.by_mnemonic.end());
  std::stable_sort(mn.begin(), mn.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> tops;
  for (size_t i = 0; i < mn.size() && i < top; ++i) tops.push_back(mn[i].first + " x" + std::to_string(mn[i].second));
  s += "\n  top: " + join(tops);
  std::vector<std::string> tensor;
  for (const auto& [mnemonic, n] : m.by_mnemonic) {
    if (sass_opcode_class(mnemonic.substr(0, mnemonic.find('.'))) == "tensor") {
      tensor.push_back(mnemonic + " x" + std::to_string(n));
    }
  }
  if (!tensor.empty()) s += "\n  tensor: " + join(tensor);
  return s;
}

// What every hint about one kernel's instruction mix needs to know.
struct MixContext {
  std::string who;
  bool matmul;
  std::string arch;
  bool hopper;
  int64_t tensor;  // tensor-core instructions of any kind
  int64_t gmma;    // of which Hopper's warpgroup MMA
};

// Spills to local memory and arithmetic promoted to FP64.
void add_precision_hints(const SassMix& m, const TaskSpec* task, const MixContext& k, std::vector<std::string>* hints) {
  const int64_t ldl = m.count_opcode("LDL");
  const int64_t stl = m.count_opcode("STL");
  if (ldl + stl > 0) {
    hints->push_back(k.who + ": LDL/STL present (" + std::to_string(ldl) + " LDL, " + std::to_string(stl) +
                     " STL): registers spill to local memory or a local array is indexed at run time. Keep "
                     "per-thread arrays in registers (compile-time indices, fully unrolled loops), reduce live "
                     "values, or move the array to shared memory; resource_usage shows the spill bytes.");
  }
  if (!task_uses_float64(task) && (m.count_class("fp64") > 0 || has_f64_conversion(m))) {
    hints->push_back(k.who + ": " + std::to_string(m.count_class("fp64")) +
                     " double-precision instructions (DADD/DMUL/DFMA, F2F.F64) in a task without float64 tensors: a "
                     "double literal (1.0 instead of 1.0f) or a double math call (exp instead of expf) promotes the "
                     "arithmetic to FP64, which runs at half the FP32 rate on H200 and adds conversions. Use float "
                     "literals and the f-suffixed functions.");
  }
}

// Matrix products that do not use the tensor cores, or not Hopper's path.
void add_tensor_core_hints(const SassMix& m, const MixContext& k, std::vector<std::string>* hints) {
  if (k.matmul && k.tensor == 0 && m.count_opcode("FFMA") > 0) {
    hints->push_back(
        k.who + ": a matmul-like kernel with FFMA (" + std::to_string(m.count_opcode("FFMA")) +
        ") but no tensor-core instruction (HMMA/HGMMA): not using tensor cores, which have an order of "
        "magnitude more throughput than FP32 FFMA. Use bf16/fp16 operands (or tf32 if the tolerance allows) with " +
        std::string(k.hopper ? "wgmma (HGMMA) on sm_90a, or mma.sync / WMMA (HMMA)." : "mma.sync / WMMA (HMMA)."));
  }
  if (k.matmul && k.hopper && k.tensor > 0 && k.gmma == 0) {
    if (k.arch.back() == 'a') {
      hints->push_back(k.who +
                       ": tensor cores through mma.sync (HMMA) but no wgmma (HGMMA): on sm_90a a GEMM without "
                       "HGMMA stays well below Hopper's tensor peak; consider wgmma.mma_async issued by a "
                       "warpgroup (4 consecutive warps) with B (and A) in shared memory, fed by TMA.");
    } else {
      hints->push_back(k.who +
                       ": tensor cores through mma.sync (HMMA) only; wgmma (HGMMA), Hopper's full-rate path, "
                       "needs the sm_90a target (-gencode=arch=compute_90a,code=sm_90a).");
    }
  }
}

// Instruction choices the compiler made from the source: narrow global
// accesses, exact division, tiles staged through registers, index arithmetic.
void add_instruction_choice_hints(const SassMix& m, const MixContext& k, std::vector<std::string>* hints) {
  const int64_t ldg = m.count_class("global_load");
  const int64_t stg = m.count_class("global_store");
  const int64_t narrow_ldg = count_bits(m, "global_load", 1, 32);
  const int64_t narrow_stg = count_bits(m, "global_store", 1, 32);
  const bool loads_narrow = ldg > 0 && narrow_ldg == ldg;
  // A tensor-core kernel's epilogue stores are a small share of its traffic.
  const bool stores_narrow = stg > 0 && narrow_stg == stg && k.tensor == 0;
  if (loads_narrow || stores_narrow) {
    const std::string what = loads_narrow && stores_narrow ? "global loads and stores are"
                             : loads_narrow                ? "global loads are"
                                                           : "global stores are";
    const std::string ops = loads_narrow && stores_narrow ? "LDG.E / STG.E" : loads_narrow ? "LDG.E" : "STG.E";
    const std::string wide = loads_narrow && stores_narrow ? "LDG.E.128 / STG.E.128"
                             : loads_narrow                ? "LDG.E.128"
                                                           : "STG.E.128";
    hints->push_back(k.who + ": all " + what + " 32-bit or narrower (" + ops +
                     "): where consecutive threads touch consecutive elements, vectorize to 128-bit (float4 / int4, "
                     "or 8 bf16 per thread, through an aligned reinterpret_cast) so they compile to " +
                     wide + ": 4x fewer memory instructions per byte.");
  }
  if (m.count_opcode("FCHK") > 0) {
    hints->push_back(k.who +
                     ": FCHK marks IEEE-exact float division with a slow-path call: if the tolerance allows, "
                     "multiply by a reciprocal computed once, or use __fdividef(x, y).");
  }
  if (k.matmul && ldg > 0 && m.count_class("shared_store") > 0 && m.count_class("async_copy") == 0 &&
      m.count_class("tma") == 0) {
    hints->push_back(
        k.who + ": tiles go global -> registers -> shared (LDG then STS): " +
        std::string(k.hopper ? "TMA (cp.async.bulk.tensor, UTMALDG) or cp.async (LDGSTS)" : "cp.async (LDGSTS)") +
        " copies without registers and overlaps the next tile's load with compute (2-3 stages).");
  }
  const int64_t integer = m.count_class("integer");
  if (m.instructions >= 40 && integer * 2 >= m.instructions) {
    hints->push_back(k.who + ": " + format_percent(static_cast<double>(integer) / m.instructions) +
                     " of the instructions are integer/address arithmetic (IMAD, IADD3, LEA, ...): hoist index math "
                     "out of loops, advance pointers by fixed strides instead of recomputing indices, and use "
                     "compile-time tile sizes.");
  }
}

}  // namespace

std::vector<std::string> sass_mix_hints(const SassMix& m, const TaskSpec* task, const std::string& device_arch) {
  MixContext k;
  k.who = display_name(m.name, 60);
  k.matmul = task_is_matmul_like(task);
  k.arch = m.arch.empty() ? device_arch : m.arch;
  k.hopper = base_arch(k.arch) == "sm_90";
  k.tensor = m.count_class("tensor");
  k.gmma = m.count_opcode("HGMMA") + m.count_opcode("QGMMA") + m.count_opcode("IGMMA") + m.count_opcode("BGMMA");
  std::vector<std::string> hints;
  add_precision_hints(m, task, k, &hints);
  add_tensor_core_hints(m, k, &hints);
  add_instruction_choice_hints(m, k, &hints);
  return hints;
}

namespace {

class SassMixTool : public AnalysisTool {
 public:
  std::string name() const override { return "sass_mix"; }

  std::string description() const override {
    return "The SASS (machine code) instruction mix of each kernel in your compiled solution: static instruction "
           "counts by opcode and by class (FP32 FFMA, tensor-core HMMA/HGMMA, global loads with their width such "
           "as LDG.E.128, shared LDS/STS, local-memory LDL/STL spills, async copies LDGSTS/TMA, barriers, MUFU, "
           "integer/address math, conversions). Use it to check that the compiler emitted the instructions you "
           "intended: vectorized loads, tensor cores, no spills, no accidental FP64.";
  }

  json parameters() const override {
    return {{"type", "object"},
            {"properties",
             {{"kernel", kernel_parameter_schema()},
              {"top",
               {{"type", "integer"},
                {"minimum", 1},
                {"maximum", 50},
                {"description", "How many of the most frequent instructions to list per kernel. Default: 10."}}}}},
            {"additionalProperties", false}};
  }

  std::vector<SolutionMode> modes() const override {
    return {SolutionMode::kCuda, SolutionMode::kNvrtc, SolutionMode::kTorchExt};
  }

  void validate_args(const json& args) const override { parse_args(args); }

  AnalysisResult run(const AnalysisInput& input) const override {
    const Args args = parse_args(input.args);
    const Listing listing = disassemble(input);
    std::vector<SassFunction> functions = keep_device_arch(parse_sass(listing.text), input.device.arch);
    if (functions.empty()) {
      throw SystemError(listing.tool + " listed no device functions in " + input.artifact->path.filename().string());
    }
    std::vector<SassMix> mixes;
    for (const auto& f : functions) mixes.push_back(summarize_sass(f));
    const auto selected = select_kernels(mixes, args.kernel);

    AnalysisResult r;
    r.ok = true;
    json kernels = json::array();
    std::map<std::string, int64_t> totals;
    std::string body = "SASS instruction mix (" + listing.tool + "; static counts, a loop body counts once), " +
                       std::to_string(selected.size()) + " function" + (selected.size() == 1 ? "" : "s") + ":";
    for (const SassMix* m : selected) {
      kernels.push_back(to_json(*m, args.top));
      for (const auto& [cls, n] : m->by_class) totals[cls] += n;
      body += "\n- " + describe(*m, args.top);
      for (auto& h : sass_mix_hints(*m, input.task, input.device.arch)) r.hints.push_back(std::move(h));
    }
    if (r.hints.size() > kMaxHints) r.hints.resize(kMaxHints);
    r.facts = {{"disassembler", listing.tool},
               {"device_arch", input.device.arch},
               {"matmul_like_task", task_is_matmul_like(input.task)},
               {"kernels", kernels},
               {"totals_by_class", totals}};
    if (r.hints.empty()) body += "\nNothing in the instruction mix calls for a change.";
    r.text = body;
    return r;
  }
};

}  // namespace

std::unique_ptr<AnalysisTool> make_sass_mix_tool() { return std::make_unique<SassMixTool>(); }

}  // namespace kforge::env
