#include "judge/elf_inspector.h"

#include <elf.h>
#include <fnmatch.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>

#include "judge/elf_image.h"
#include "kforge/core/error.h"

namespace kforge::judge {
namespace {

using internal::AddressToOffset;
using internal::DynamicSymbols;
using internal::ElfImage;
using internal::FunctionNames;
using internal::hex;
using internal::LoadTags;
using internal::read_file;
using internal::read_function_names;
using internal::read_load_time_code;
using internal::read_sections;
using internal::SectionInfo;

// Functions that toolchains put into .init_array themselves (see the header).
// Exact names must be unique in the object, so that a candidate cannot hide a
// constructor behind a second "frame_dummy".
const char* const kToolchainInitFunctions[] = {"frame_dummy", "register_tm_clones", "__do_global_ctors_aux",
                                               "init_have_lse_atomics"};
const char* const kToolchainInitPatterns[] = {"*__sti____cudaRegisterAll*", "_GLOBAL__sub_I_*"};

bool is_exact_toolchain_name(const std::string& name) {
  return std::find(std::begin(kToolchainInitFunctions), std::end(kToolchainInitFunctions), name) !=
         std::end(kToolchainInitFunctions);
}

bool is_toolchain_name(const std::string& name) {
  if (is_exact_toolchain_name(name)) return true;
  return std::any_of(std::begin(kToolchainInitPatterns), std::end(kToolchainInitPatterns),
                     [&](const char* p) { return ::fnmatch(p, name.c_str(), 0) == 0; });
}

const char* const kConstructorAdvice =
    " (code must run inside kf_forward; do one-time set-up there, e.g. in a function-local static)";

// Imports that put work on a GPU (or set it up). Toolchain initializers
// reach only registration (__cudaRegisterFatBinary, __cudaRegisterFunction,
// atexit); a namespace-scope initializer that reaches one of these launches
// or copies while the object loads: untimed, unchecked work.
const char* const kDeviceWorkImports[] = {"cudaLaunch*", "__cudaLaunch*", "__cudaPushCallConfiguration",
                                          "cudaMemcpy*", "cudaMemset*",   "cudaMalloc*",
                                          "cudaFree*",   "cudaGraph*",    "cudaStream*",
                                          "cudaEvent*",  "cublas*",       "cudnn*",
                                          "cuLaunch*",   "cuMem*",        "cudaGetKernel"};

std::string device_work_reached(const ElfLoadTimeCode& code) {
  for (const auto& name : code.reaches) {
    for (const char* p : kDeviceWorkImports) {
      if (::fnmatch(p, name.c_str(), 0) == 0) return name;
    }
  }
  return "";
}

std::string load_time_code_problem(const ElfLoadTimeCode& code, bool has_symbol_table) {
  std::string where = code.kind == "init_array" ? "an .init_array entry"
                      : code.kind == "ctors"    ? "a .ctors entry"
                      : code.kind == "init"     ? "DT_INIT"
                                                : "an IFUNC resolver";
  std::string names;
  for (size_t i = 0; i < code.names.size(); ++i) names += (i ? "/" : "") + code.names[i];
  if (code.kind == "ifunc") {
    return where + " (" + (names.empty() ? hex(code.address) : names) +
           ") runs while the object is relocated; dispatch inside kf_forward instead";
  }
  if (code.kind == "init") {
    if (!code.anomaly.empty()) return where + ": " + code.anomaly;
    if (std::find(code.names.begin(), code.names.end(), "_init") == code.names.end() && has_symbol_table) {
      return where + " points at " + (names.empty() ? hex(code.address) : names) + ", not the C runtime's _init";
    }
    return "";
  }
  if (!code.imported.empty()) {
    return where + " calls the imported function " + code.imported + " while the object loads" + kConstructorAdvice;
  }
  if (code.names.empty()) {
    return where + " calls an unnamed function at " + hex(code.address) +
           (has_symbol_table ? "" : " (the object has no symbol table)") + kConstructorAdvice;
  }
  for (size_t i = 0; i < code.names.size(); ++i) {
    if (!is_toolchain_name(code.names[i])) {
      return where + " runs the constructor " + names + " while the object loads" + kConstructorAdvice;
    }
    if (is_exact_toolchain_name(code.names[i]) && code.name_counts[i] > 1) {
      return where + " runs " + code.names[i] + ", a name " + std::to_string(code.name_counts[i]) +
             " functions in the object carry (a toolchain name reused for a constructor)";
    }
  }
  if (std::string work = device_work_reached(code); !work.empty()) {
    return where + " runs " + names + ", which calls " + work +
           ": GPU work while the object loads, untimed and unchecked (a namespace-scope initializer such as "
           "`static int x = f();` runs at load)" +
           kConstructorAdvice;
  }
  return "";
}

// The executable bytes to decode: code sections inside executable segments,
// and whatever else those segments hold (a gap between sections is still
// mapped executable, so it is decoded too). Section headers only guide where
// decoding starts; the segments decide what is executable.
std::vector<CodeRegion> code_regions(const std::vector<Elf64_Phdr>& loads, const std::vector<SectionInfo>& sections) {
  std::vector<CodeRegion> out;
  for (size_t i = 0; i < loads.size(); ++i) {
    const Elf64_Phdr& ph = loads[i];
    if (!(ph.p_flags & PF_X)) continue;
    std::vector<CodeRegion> inside;
    for (const auto& sec : sections) {
      const Elf64_Shdr& h = sec.header;
      if (!(h.sh_flags & SHF_EXECINSTR) || h.sh_type == SHT_NOBITS || h.sh_size == 0) continue;
      if (h.sh_offset < ph.p_offset || h.sh_offset + h.sh_size > ph.p_offset + ph.p_filesz) continue;
      inside.push_back({h.sh_addr, h.sh_offset, h.sh_size, sec.name.empty() ? "a code section" : sec.name});
    }
    std::sort(inside.begin(), inside.end(),
              [](const CodeRegion& a, const CodeRegion& b) { return a.file_offset < b.file_offset; });
    uint64_t at = ph.p_offset;
    const std::string segment = "executable segment " + std::to_string(i);
    for (const auto& r : inside) {
      if (r.file_offset < at) continue;  // overlapping sections: the first one covers it
      if (r.file_offset > at) out.push_back({ph.p_vaddr + (at - ph.p_offset), at, r.file_offset - at, segment});
      out.push_back(r);
      at = r.file_offset + r.size;
    }
    const uint64_t end = ph.p_offset + ph.p_filesz;
    if (at < end) out.push_back({ph.p_vaddr + (at - ph.p_offset), at, end - at, segment});
  }
  return out;
}

Elf64_Ehdr read_header(const ElfImage& img) {
  const auto& b = img.bytes();
  if (b.size() < EI_NIDENT || std::memcmp(b.data(), ELFMAG, SELFMAG) != 0) throw InputError("not an ELF file");
  if (b[EI_CLASS] != ELFCLASS64) throw InputError("not a 64-bit ELF file");
  if (b[EI_DATA] != ELFDATA2LSB) throw InputError("not a little-endian ELF file");
  auto eh = img.read<Elf64_Ehdr>(0, "ELF header");
  if (eh.e_type != ET_DYN) throw InputError("not a shared object (e_type " + std::to_string(eh.e_type) + ")");
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) throw InputError("unexpected program header size");
  return eh;
}

struct ProgramHeaders {
  uint64_t dyn_offset = 0, dyn_size = 0;
  std::vector<Elf64_Phdr> loads;
};

// Program headers: W+X segments, executable bytes, the dynamic section.
ProgramHeaders read_program_headers(const ElfImage& img, const Elf64_Ehdr& eh, ElfFacts* facts) {
  ProgramHeaders out;
  bool has_stack_header = false;
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    auto ph = img.read<Elf64_Phdr>(eh.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr), "program header");
    if (ph.p_type == PT_LOAD) {
      out.loads.push_back(ph);
      if ((ph.p_flags & PF_W) && (ph.p_flags & PF_X)) {
        facts->wx_segments.push_back("segment " + std::to_string(i) + " at " + hex(ph.p_vaddr) + " (" +
                                     ((ph.p_flags & PF_R) ? "R" : "") + "WX)");
      }
    } else if (ph.p_type == PT_DYNAMIC) {
      out.dyn_offset = ph.p_offset;
      out.dyn_size = ph.p_filesz;
    } else if (ph.p_type == PT_GNU_STACK) {
      has_stack_header = true;
      if (ph.p_flags & PF_X) facts->load_hazards.push_back("PT_GNU_STACK asks for an executable stack");
    }
  }
  // Without the header the loader assumes the object needs an executable stack.
  if (!has_stack_header) {
    facts->load_hazards.push_back("no PT_GNU_STACK header: the loader would make the stack executable");
  }
  if (out.dyn_size == 0) throw InputError("no dynamic section (a static executable, not a shared object)");
  return out;
}

struct DynamicEntries {
  uint64_t strtab = 0, strsz = 0, symtab = 0, syment = sizeof(Elf64_Sym), hash = 0, gnu_hash = 0;
  std::vector<uint64_t> needed_offsets;
  LoadTags tags;  // what the load-time code reader needs
};

DynamicEntries read_dynamic_section(const ElfImage& img, const ProgramHeaders& ph) {
  DynamicEntries e;
  for (uint64_t off = ph.dyn_offset; off + sizeof(Elf64_Dyn) <= ph.dyn_offset + ph.dyn_size; off += sizeof(Elf64_Dyn)) {
    auto d = img.read<Elf64_Dyn>(off, "dynamic entry");
    if (d.d_tag == DT_NULL) break;
    switch (d.d_tag) {
      case DT_STRTAB:
        e.strtab = d.d_un.d_ptr;
        break;
      case DT_STRSZ:
        e.strsz = d.d_un.d_val;
        break;
      case DT_SYMTAB:
        e.symtab = d.d_un.d_ptr;
        break;
      case DT_SYMENT:
        e.syment = d.d_un.d_val;
        break;
      case DT_HASH:
        e.hash = d.d_un.d_ptr;
        break;
      case DT_GNU_HASH:
        e.gnu_hash = d.d_un.d_ptr;
        break;
      case DT_NEEDED:
        e.needed_offsets.push_back(d.d_un.d_val);
        break;
      default:
        e.tags.record(d);
        break;
    }
  }
  if (e.strtab == 0 || e.symtab == 0) throw InputError("dynamic section has no symbol or string table");
  if (e.syment != sizeof(Elf64_Sym)) throw InputError("unexpected dynamic symbol size");
  return e;
}

// The number of dynamic symbols is not stored directly: DT_HASH has it, and
// with only DT_GNU_HASH it is one past the highest index in the chains.
uint64_t count_dynamic_symbols(const ElfImage& img, const DynamicEntries& dyn, const AddressToOffset& to_offset,
                               uint64_t str_off, uint64_t sym_off) {
  uint64_t nsyms = 0;
  if (dyn.hash != 0) {
    nsyms = img.read<uint32_t>(to_offset(dyn.hash, "hash table") + 4, "hash table");
  } else if (dyn.gnu_hash != 0) {
    uint64_t h = to_offset(dyn.gnu_hash, "GNU hash table");
    auto nbuckets = img.read<uint32_t>(h, "GNU hash table");
    auto symoffset = img.read<uint32_t>(h + 4, "GNU hash table");
    auto bloom_size = img.read<uint32_t>(h + 8, "GNU hash table");
    uint64_t buckets = h + 16 + uint64_t{bloom_size} * 8;
    uint64_t chains = buckets + uint64_t{nbuckets} * 4;
    uint32_t last = 0;
    for (uint32_t i = 0; i < nbuckets; ++i) last = std::max(last, img.read<uint32_t>(buckets + i * 4ull, "bucket"));
    if (last < symoffset) {
      nsyms = symoffset;
    } else {
      while (!(img.read<uint32_t>(chains + (last - symoffset) * 4ull, "hash chain") & 1u)) ++last;
      nsyms = uint64_t{last} + 1;
    }
  } else {
    // No hash table: the symbol table usually ends where the string table begins.
    if (str_off <= sym_off) throw InputError("cannot determine the number of dynamic symbols");
    nsyms = (str_off - sym_off) / sizeof(Elf64_Sym);
  }
  if (nsyms > (img.bytes().size() / sizeof(Elf64_Sym))) throw InputError("implausible dynamic symbol count");
  return nsyms;
}

// Imports (undefined, weak or not) and the functions the object exports.
void read_dynamic_symbols(const ElfImage& img, const DynamicSymbols& dynsym, ElfFacts* facts) {
  for (uint64_t i = 1; i < dynsym.count; ++i) {
    auto s = img.read<Elf64_Sym>(dynsym.offset + i * sizeof(Elf64_Sym), "dynamic symbol");
    std::string name = img.string_at(dynsym.strings, dynsym.strings_size, s.st_name);
    if (name.empty()) continue;
    unsigned bind = ELF64_ST_BIND(s.st_info);
    if (s.st_shndx == SHN_UNDEF) {
      facts->undefined.push_back({name, bind == STB_WEAK});
    } else if (ELF64_ST_TYPE(s.st_info) == STT_FUNC && (bind == STB_GLOBAL || bind == STB_WEAK) &&
               ELF64_ST_VISIBILITY(s.st_other) == STV_DEFAULT) {
      facts->exported_functions.push_back(name);
    }
  }
}

}  // namespace

ElfFacts read_elf_facts(const std::filesystem::path& path) {
  ElfImage img(read_file(path));
  const Elf64_Ehdr eh = read_header(img);
  ElfFacts facts;
  facts.machine = eh.e_machine;
  const ProgramHeaders ph = read_program_headers(img, eh, &facts);

  // The dynamic section gives addresses; map them to file offsets via PT_LOAD.
  auto to_offset = [&](uint64_t vaddr, const char* what) -> uint64_t {
    for (const auto& load : ph.loads) {
      if (vaddr >= load.p_vaddr && vaddr < load.p_vaddr + load.p_filesz) return vaddr - load.p_vaddr + load.p_offset;
    }
    throw InputError(std::string("ELF ") + what + " address " + hex(vaddr) + " is outside every loadable segment");
  };
  const DynamicEntries dyn = read_dynamic_section(img, ph);
  uint64_t str_off = to_offset(dyn.strtab, "string table");
  uint64_t sym_off = to_offset(dyn.symtab, "symbol table");
  for (uint64_t n : dyn.needed_offsets) facts.needed.push_back(img.string_at(str_off, dyn.strsz, n));
  const uint64_t nsyms = count_dynamic_symbols(img, dyn, to_offset, str_off, sym_off);
  DynamicSymbols dynsym{sym_off, nsyms, str_off, dyn.strsz};
  read_dynamic_symbols(img, dynsym, &facts);

  const std::vector<SectionInfo> sections = read_sections(img, eh);
  const FunctionNames names = read_function_names(img, sections, dynsym, &facts.has_symbol_table);
  read_load_time_code(img, eh, dyn.tags, dynsym, to_offset, sections, names, &facts);
  std::map<uint64_t, std::string> functions;
  for (const auto& [address, name] : names.at) functions.emplace(address, name);
  facts.syscalls = scan_syscalls(img.bytes(), eh.e_machine, code_regions(ph.loads, sections), functions);
  return facts;
}

ElfInspection inspect_candidate(const std::filesystem::path& path, const SymbolPolicy& policy) {
  ElfInspection r;
  try {
    r.facts = read_elf_facts(path);
  } catch (const InputError& e) {
    r.violations.push_back({"malformed_elf", path.filename().string() + ": " + e.what()});
    return r;
  }
  const ElfFacts& f = r.facts;
#if defined(__x86_64__)
  const uint16_t host_machine = EM_X86_64;
#elif defined(__aarch64__)
  const uint16_t host_machine = EM_AARCH64;
#else
  const uint16_t host_machine = f.machine;
#endif
  if (f.machine != host_machine) {
    r.violations.push_back({"malformed_elf", "built for ELF machine " + std::to_string(f.machine) +
                                                 ", this host is machine " + std::to_string(host_machine)});
  }
  if (std::find(f.exported_functions.begin(), f.exported_functions.end(), "kf_forward") == f.exported_functions.end()) {
    r.violations.push_back(
        {"missing_entry_point", "no exported function kf_forward (declare it extern \"C\" with default visibility)"});
  }
  for (const auto& sym : f.undefined) {
    if (policy.allows_symbol(sym.name)) continue;
    std::string reason = SymbolPolicy::refusal_reason(sym.name);
    r.violations.push_back({"forbidden_symbol", "uses " + sym.name + (reason.empty() ? "" : " (" + reason + ")") +
                                                    ", which the " + policy.backend() + " backend does not allow"});
  }
  for (const auto& lib : f.needed) {
    if (!policy.allows_library(lib)) {
      r.violations.push_back(
          {"forbidden_library", "links " + lib + ", which the " + policy.backend() + " backend does not allow"});
    }
  }
  for (const auto& seg : f.wx_segments) {
    r.violations.push_back({"writable_executable", seg + " is both writable and executable"});
  }
  for (const auto& code : f.load_time_code) {
    std::string problem = load_time_code_problem(code, f.has_symbol_table);
    if (!problem.empty()) r.violations.push_back({"load_constructor", problem});
  }
  for (const auto& hazard : f.load_hazards) r.violations.push_back({"load_section", hazard});
  if (const auto& sites = f.syscalls.sites; !sites.empty()) {
    std::string where;
    for (size_t i = 0; i < sites.size() && i < 4; ++i) {
      where += (i ? ", " : "") + sites[i].instruction + " in " + sites[i].where + " (file offset " +
               hex(sites[i].file_offset) + ")";
    }
    if (sites.size() > 4) where += ", ...";
    r.violations.push_back({"raw_syscall", std::to_string(sites.size()) + " system-call instruction(s): " + where +
                                               " (kernels must not enter the OS directly)"});
  }
  r.accepted = r.violations.empty();
  return r;
}

}  // namespace kforge::judge
