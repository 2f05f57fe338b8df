#include "kforge/env/analysis/sass.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <unordered_map>

#include "kforge/env/analysis/resources.h"
#include "text_util.h"

namespace kforge::env {
namespace {

using internal::starts_with;
using internal::trim;

bool is_hex(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

// "/*0a30*/  @!P0 LDG.E.128 R4, desc[UR6][R2.64] ;  /* 0x... */" -> instruction.
bool parse_instruction_line(const std::string& t, SassInstruction* out) {
  if (!starts_with(t, "/*")) return false;
  const size_t close = t.find("*/", 2);
  if (close == std::string::npos) return false;
  const std::string addr = t.substr(2, close - 2);
  if (!is_hex(addr)) return false;  // encoding-only lines: "/* 0x000fe40000000800 */"
  std::string body = t.substr(close + 2);
  const size_t enc = body.find("/*");
  if (enc != std::string::npos) body = body.substr(0, enc);
  body = trim(body);
  // Kepler/Maxwell dual-issue braces.
  if (!body.empty() && body.front() == '{') body = trim(body.substr(1));
  if (!body.empty() && body.back() == '}') body = trim(body.substr(0, body.size() - 1));
  if (!body.empty() && body.back() == ';') body = trim(body.substr(0, body.size() - 1));
  if (body.empty()) return false;
  std::istringstream in(body);
  std::string tok;
  in >> tok;
  SassInstruction ins;
  ins.address = std::stoull(addr, nullptr, 16);
  if (!tok.empty() && tok[0] == '@') {
    ins.predicate = tok;
    if (!(in >> tok)) return false;
  }
  ins.opcode = tok;
  ins.base = tok.substr(0, tok.find('.'));
  std::getline(in, ins.operands);
  ins.operands = trim(ins.operands);
  if (ins.base.empty() || !std::isupper(static_cast<unsigned char>(ins.base[0]))) return false;
  *out = std::move(ins);
  return true;
}

// "EF_CUDA_SM90" in a .headerflags line -> "sm_90" (nvdisasm prints no arch line).
std::string arch_from_headerflags(const std::string& t) {
  const std::string key = "EF_CUDA_SM";
  const size_t p = t.find(key);
  if (p == std::string::npos) return "";
  size_t e = p + key.size();
  while (e < t.size() && std::isdigit(static_cast<unsigned char>(t[e]))) ++e;
  if (e == p + key.size()) return "";
  return "sm_" + t.substr(p + key.size(), e - p - key.size());
}

const std::unordered_map<std::string, std::string>& opcode_classes() {
  static const auto* kMap = [] {
    auto* m = new std::unordered_map<std::string, std::string>();
    auto add = [&](const std::string& cls, std::initializer_list<const char*> ops) {
      for (const char* op : ops) (*m)[op] = cls;
    };
    add("fp32", {"FFMA", "FADD", "FMUL", "FMNMX", "FSETP", "FSET", "FSEL", "FCHK", "FSWZADD", "FFMA32I", "FADD32I",
                 "FMUL32I", "FFMA2", "FADD2", "FMUL2", "FMNMX3", "FSWZ"});
    add("fp64", {"DFMA", "DADD", "DMUL", "DSETP", "DMNMX", "DSET"});
    add("fp16", {"HFMA2", "HADD2", "HMUL2", "HMNMX2", "HSETP2", "HSET2", "HFMA", "HADD", "HMUL"});
    add("tensor", {"HMMA", "HGMMA", "IMMA", "IGMMA", "BMMA", "BGMMA", "DMMA", "QMMA", "QGMMA", "OMMA", "UTCHMMA",
                   "UTCIMMA", "UTCQMMA", "UTCOMMA", "UTCMMA", "UTCBAR"});
    add("global_load", {"LDG"});
    add("global_store", {"STG"});
    add("global_atomic", {"ATOMG", "RED", "REDG"});
    add("generic_memory", {"LD", "ST", "ATOM", "CCTL", "LDGMC"});
    add("shared_load", {"LDS", "LDSM", "LDTM"});
    add("shared_store", {"STS", "STSM", "STTM"});
    add("shared_atomic", {"ATOMS", "REDAS"});
    add("local_load", {"LDL"});
    add("local_store", {"STL"});
    add("constant_load", {"LDC", "ULDC", "LDCU"});
    add("async_copy", {"LDGSTS", "LDGDEPBAR"});
    add("tma", {"UTMALDG", "UTMASTG", "UTMAPF", "UTMACCTL", "UTMACMDFLUSH", "UTMAREDG", "UBLKCP", "UBLKRED", "UBLKPF"});
    add("sync", {"BAR", "BARRIER", "SYNCS", "MEMBAR", "DEPBAR", "WARPSYNC", "ERRBAR", "ARRIVES", "WARPGROUP", "FENCE",
                 "UCGABAR_ARV", "UCGABAR_WAIT", "CGAERRBAR", "ELECT", "ACQBULK", "ACQSHMINIT"});
    add("control",
        {"BRA",  "BRX",   "BRXU", "JMP", "JMX", "CALL", "RET",       "EXIT",     "BSSY",    "BSYNC",        "BREAK",
         "BMOV", "YIELD", "KILL", "BPT", "RTT", "JMXU", "NANOSLEEP", "SETCTAID", "PREEXIT", "ENDCOLLECTIVE"});
    add("special", {"MUFU"});
    add("integer",
        {"IMAD",    "IMADSP",    "IMUL",   "IMUL32I",   "IADD",     "IADD3",     "IADD32I", "IMNMX",  "IABS",
         "ISETP",   "ISET",      "ISCADD", "ISCADD32I", "LEA",      "LOP",       "LOP3",    "LOP32I", "SHF",
         "SHL",     "SHR",       "POPC",   "FLO",       "BREV",     "BMSK",      "SGXT",    "VIADD",  "VIMNMX",
         "VIMNMX3", "VIADDMNMX", "IDP",    "IDP4A",     "VABSDIFF", "VABSDIFF4", "IMNMX3",  "UIMAD",  "UIADD3",
         "ULEA",    "ULOP",      "ULOP3",  "ULOP32I",   "USHF",     "USHL",      "USHR",    "UISETP", "UPOPC",
         "UFLO",    "UBREV",     "UBMSK",  "USGXT",     "UIMNMX",   "UIABS",     "UVIADD"});
    add("conversion", {"F2F", "F2I", "I2F", "I2I", "F2FP", "I2FP", "FRND", "F2IP", "I2IP", "UF2FP", "F2UP"});
    add("move", {"MOV",   "MOV32I", "PRMT",        "SEL",         "S2R",   "S2UR",  "CS2R",  "R2UR",   "R2P",    "P2R",
                 "PLOP3", "PSETP",  "UMOV",        "USEL",        "UPRMT", "UP2UR", "UR2UP", "UPLOP3", "UPSETP", "B2R",
                 "R2B",   "PMTRIG", "GETLMEMBASE", "SETLMEMBASE", "LEPC",  "UCLEA", "ULEPC", "CSMTEST"});
    add("warp", {"SHFL", "VOTE", "VOTEU", "MATCH", "REDUX", "CREDUX"});
    add("texture", {"TEX", "TLD", "TLD4", "TXQ", "TMML", "TXD", "SULD", "SUST", "SUATOM", "SURED", "SUQUERY"});
    add("nop", {"NOP"});
    return m;
  }();
  return *kMap;
}

}  // namespace

std::vector<SassFunction> parse_sass(const std::string& text) {
  std::vector<SassFunction> out;
  std::istringstream in(text);
  std::string line;
  std::string arch;
  bool in_function = false;
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    if (t.empty()) continue;
    SassInstruction ins;
    if (in_function && parse_instruction_line(t, &ins)) {
      out.back().instructions.push_back(std::move(ins));
      continue;
    }
    if (starts_with(t, "arch = ")) {
      arch = trim(t.substr(7));
      in_function = false;
    } else if (starts_with(t, "code for ")) {
      arch = trim(t.substr(9));
    } else if (starts_with(t, ".target") && t.size() > 8 && std::isspace(static_cast<unsigned char>(t[7]))) {
      arch = trim(t.substr(8));  // nvdisasm, and cuobjdump on a bare CUBIN
    } else if (starts_with(t, "Function : ")) {
      out.push_back(SassFunction{trim(t.substr(11)), arch, {}});
      in_function = true;
    } else if (starts_with(t, ".text.") && t.back() == ':' && t.find(' ') == std::string::npos &&
               t.find(',') == std::string::npos) {
      out.push_back(SassFunction{t.substr(6, t.size() - 7), arch, {}});
      in_function = true;
    } else if (starts_with(t, ".headerflags")) {
      if (!out.empty() && out.back().arch.empty()) out.back().arch = arch_from_headerflags(t);
    } else if (starts_with(t, "Fatbin ") || starts_with(t, "..........") ||
               (t[0] == '.' && t.back() == ':' && !starts_with(t, ".L"))) {
      // End of a function: the next ELF, the end marker, or another section
      // such as ".nv.uft :" whose instructions belong to no kernel.
      in_function = false;
    }
  }
  return out;
}

const std::vector<std::string>& sass_class_names() {
  static const std::vector<std::string> kNames = {
      "fp32",           "fp64",        "fp16",         "tensor",        "global_load", "global_store", "global_atomic",
      "generic_memory", "shared_load", "shared_store", "shared_atomic", "local_load",  "local_store",  "constant_load",
      "async_copy",     "tma",         "sync",         "control",       "special",     "integer",      "conversion",
      "move",           "warp",        "texture",      "nop",           "other"};
  return kNames;
}

const std::string& sass_opcode_class(const std::string& base) {
  static const std::string kOther = "other";
  static const std::string kInteger = "integer";
  static const std::string kMove = "move";
  const auto& m = opcode_classes();
  auto it = m.find(base);
  if (it != m.end()) return it->second;
  // Uniform-datapath forms of ordinary integer and move instructions
  // (UIADD3, UMOV, ...) not listed one by one.
  if (base.size() > 1 && base[0] == 'U') {
    auto u = m.find(base.substr(1));
    if (u != m.end() && (u->second == kInteger || u->second == kMove)) return u->second;
  }
  return kOther;
}

int sass_access_bits(const std::string& opcode) {
  const std::string base = opcode.substr(0, opcode.find('.'));
  static const char* kPlain[] = {"LDG", "STG", "LDS", "STS", "LDL", "STL", "LD", "ST"};
  if (std::none_of(std::begin(kPlain), std::end(kPlain), [&](const char* p) { return base == p; })) return 0;
  int bits = 32;
  std::istringstream in(opcode);
  std::string mod;
  std::getline(in, mod, '.');  // the base
  while (std::getline(in, mod, '.')) {
    if (mod == "U8" || mod == "S8") bits = 8;
    if (mod == "U16" || mod == "S16") bits = 16;
    if (mod == "64") bits = 64;
    if (mod == "128") bits = 128;
    if (mod == "256") bits = 256;
  }
  return bits;
}

int64_t SassMix::count_class(const std::string& cls) const {
  auto it = by_class.find(cls);
  return it == by_class.end() ? 0 : it->second;
}

int64_t SassMix::count_opcode(const std::string& base) const {
  auto it = by_opcode.find(base);
  return it == by_opcode.end() ? 0 : it->second;
}

SassMix summarize_sass(const SassFunction& f) {
  SassMix m;
  m.name = f.name;
  m.arch = f.arch;
  for (const auto& ins : f.instructions) {
    const std::string& cls = sass_opcode_class(ins.base);
    if (cls == "nop") continue;  // alignment padding after the last branch
    ++m.instructions;
    if (!ins.predicate.empty()) ++m.predicated;
    ++m.by_opcode[ins.base];
    ++m.by_mnemonic[ins.opcode];
    ++m.by_class[cls];
    const int bits = sass_access_bits(ins.opcode);
    if (bits > 0 && (cls == "global_load" || cls == "global_store" || cls == "shared_load" || cls == "shared_store" ||
                     cls == "local_load" || cls == "local_store" || cls == "generic_memory")) {
      ++m.access_bits[cls][bits];
    }
  }
  return m;
}

json to_json(const SassMix& m, size_t top) {
  json j = {{"name", m.name},
            {"demangled", demangle(m.name)},
            {"arch", m.arch},
            {"instructions", m.instructions},
            {"predicated", m.predicated},
            {"by_class", m.by_class},
            {"by_opcode", m.by_opcode}};
  std::vector<std::pair<std::string, int64_t>> mn(m.by_mnemonic.begin(), m.by_mnemonic.end());
  std::stable_sort(mn.begin(), mn.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  json topj = json::array();
  for (size_t i = 0; i < mn.size() && i < top; ++i)
    topj.push_back({{"mnemonic", mn[i].first}, {"count", mn[i].second}});
  j["top_mnemonics"] = topj;
  json tensor = json::object();
  for (const auto& [mnemonic, n] : m.by_mnemonic) {
    if (sass_opcode_class(mnemonic.substr(0, mnemonic.find('.'))) == "tensor") tensor[mnemonic] = n;
  }
  j["tensor_mnemonics"] = tensor;
  json bits = json::object();
  for (const auto& [cls, hist] : m.access_bits) {
    json h = json::object();
    for (const auto& [b, n] : hist) h[std::to_string(b)] = n;
    bits[cls] = h;
  }
  j["access_bits"] = bits;
  return j;
}

}  // namespace kforge::env
