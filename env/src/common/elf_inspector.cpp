#include "common/elf_inspector.h"

#include <elf.h>
#include <fnmatch.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "kforge/core/error.h"

namespace kforge::exec {
namespace {

// A bounds-checked view of the file: every read names what it was reading, so a
// truncated or corrupt file gives a clear error instead of undefined behaviour.
class ElfImage {
 public:
  explicit ElfImage(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}

  template <typename T>
  T read(uint64_t offset, const char* what) const {
    if (offset > bytes_.size() || sizeof(T) > bytes_.size() - offset) {
      throw InputError(std::string("truncated ELF file: ") + what + " at offset " + std::to_string(offset) +
                       " is past the end (" + std::to_string(bytes_.size()) + " bytes)");
    }
    T value;
    std::memcpy(&value, bytes_.data() + offset, sizeof(T));
    return value;
  }

  std::string string_at(uint64_t table_offset, uint64_t table_size, uint64_t index) const {
    if (index >= table_size || table_offset + table_size > bytes_.size()) {
      throw InputError("corrupt ELF string table reference");
    }
    const char* begin = reinterpret_cast<const char*>(bytes_.data() + table_offset + index);
    size_t max_len = table_size - index;
    return std::string(begin, strnlen(begin, max_len));
  }

  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open " + path.string());
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return bytes;
}

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Dynamic-section entries that decide what runs, or from where, at load time.
struct LoadTags {
  uint64_t init = 0, init_array = 0, init_array_size = 0, preinit_array = 0;
  uint64_t rela = 0, rela_size = 0, rela_ent = sizeof(Elf64_Rela), jmprel = 0, pltrel_size = 0;
  uint64_t pltrel = DT_RELA;
  bool has_init = false, has_init_array = false, textrel = false;
  // (tag name, string-table offset) of entries that name other files.
  std::vector<std::pair<std::string, uint64_t>> path_entries;
  std::vector<std::string> other_hazards;

  void record(const Elf64_Dyn& d) {
    switch (d.d_tag) {
      case DT_INIT:
        has_init = true;
        init = d.d_un.d_ptr;
        break;
      case DT_INIT_ARRAY:
        has_init_array = true;
        init_array = d.d_un.d_ptr;
        break;
      case DT_INIT_ARRAYSZ:
        init_array_size = d.d_un.d_val;
        break;
      case DT_PREINIT_ARRAY:
        preinit_array = d.d_un.d_ptr;
        other_hazards.push_back("DT_PREINIT_ARRAY: functions run before any constructor");
        break;
      case DT_RELA:
        rela = d.d_un.d_ptr;
        break;
      case DT_RELASZ:
        rela_size = d.d_un.d_val;
        break;
      case DT_RELAENT:
        rela_ent = d.d_un.d_val;
        break;
      case DT_JMPREL:
        jmprel = d.d_un.d_ptr;
        break;
      case DT_PLTRELSZ:
        pltrel_size = d.d_un.d_val;
        break;
      case DT_PLTREL:
        pltrel = d.d_un.d_val;
        break;
      case DT_TEXTREL:
        textrel = true;
        break;
      case DT_FLAGS:
        if (d.d_un.d_val & DF_TEXTREL) textrel = true;
        break;
      case DT_RPATH:
        path_entries.emplace_back("DT_RPATH", d.d_un.d_val);
        break;
      case DT_RUNPATH:
        path_entries.emplace_back("DT_RUNPATH", d.d_un.d_val);
        break;
      case DT_AUXILIARY:
        path_entries.emplace_back("DT_AUXILIARY", d.d_un.d_val);
        break;
      case DT_FILTER:
        path_entries.emplace_back("DT_FILTER", d.d_un.d_val);
        break;
      case DT_AUDIT:
        path_entries.emplace_back("DT_AUDIT", d.d_un.d_val);
        break;
      case DT_DEPAUDIT:
        path_entries.emplace_back("DT_DEPAUDIT", d.d_un.d_val);
        break;
      default:
        break;
    }
  }
};

struct DynamicSymbols {
  uint64_t offset = 0, count = 0, strings = 0, strings_size = 0;
};

struct SectionInfo {
  std::string name;
  Elf64_Shdr header{};
};

// Section headers are optional for loading (a stripped file may lack them);
// an empty result means "unknown", never an error.
std::vector<SectionInfo> read_sections(const ElfImage& img, const Elf64_Ehdr& eh) {
  std::vector<SectionInfo> out;
  if (eh.e_shoff == 0 || eh.e_shnum == 0 || eh.e_shentsize != sizeof(Elf64_Shdr)) return out;
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    out.push_back({"", img.read<Elf64_Shdr>(eh.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr), "section header")});
  }
  if (eh.e_shstrndx < out.size()) {
    const Elf64_Shdr& names = out[eh.e_shstrndx].header;
    for (auto& s : out) {
      if (s.header.sh_name < names.sh_size) s.name = img.string_at(names.sh_offset, names.sh_size, s.header.sh_name);
    }
  }
  return out;
}

// Function names by address: from .symtab when present (it names local
// functions such as frame_dummy), else from .dynsym.
struct FunctionNames {
  std::multimap<uint64_t, std::string> at;
  std::map<std::string, int> count;
  std::map<uint64_t, uint64_t> size_at;  // functions' extents, for the load-time call graph

  void add(const Elf64_Sym& s, const std::string& name) {
    unsigned type = ELF64_ST_TYPE(s.st_info);
    if (name.empty() || s.st_shndx == SHN_UNDEF || s.st_shndx == SHN_ABS) return;
    if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE) return;
    at.emplace(s.st_value, name);
    ++count[name];
    if (type == STT_FUNC && s.st_size > 0) size_at[s.st_value] = std::max(size_at[s.st_value], s.st_size);
  }
};

FunctionNames read_function_names(const ElfImage& img, const std::vector<SectionInfo>& sections,
                                  const DynamicSymbols& dynsym, bool* from_symtab) {
  FunctionNames names;
  *from_symtab = false;
  for (const auto& sec : sections) {
    const Elf64_Shdr& h = sec.header;
    if (h.sh_type != SHT_SYMTAB || h.sh_entsize != sizeof(Elf64_Sym) || h.sh_link >= sections.size()) continue;
    const Elf64_Shdr& str = sections[h.sh_link].header;
    for (uint64_t i = 1; i < h.sh_size / sizeof(Elf64_Sym); ++i) {
      auto s = img.read<Elf64_Sym>(h.sh_offset + i * sizeof(Elf64_Sym), "symbol");
      names.add(s, img.string_at(str.sh_offset, str.sh_size, s.st_name));
    }
    *from_symtab = true;
    return names;
  }
  for (uint64_t i = 1; i < dynsym.count; ++i) {
    auto s = img.read<Elf64_Sym>(dynsym.offset + i * sizeof(Elf64_Sym), "dynamic symbol");
    names.add(s, img.string_at(dynsym.strings, dynsym.strings_size, s.st_name));
  }
  return names;
}

// Relocation types that matter here, per machine.
struct RelocTypes {
  uint32_t relative, abs64, glob_dat, jump_slot, irelative;
};
RelocTypes reloc_types(uint16_t machine) {
  if (machine == EM_AARCH64) {
    return {R_AARCH64_RELATIVE, R_AARCH64_ABS64, R_AARCH64_GLOB_DAT, R_AARCH64_JUMP_SLOT, R_AARCH64_IRELATIVE};
  }
  return {R_X86_64_RELATIVE, R_X86_64_64, R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT, R_X86_64_IRELATIVE};
}

// What the C runtime's _init (crti.o + crtn.o) assembles to on x86-64: call
// __gmon_start__ if a profiler defined it, nothing else. 0x100 marks the four
// bytes of the GOT displacement, which vary. CET-enabled toolchains prepend
// endbr64.
const std::vector<int> kX86InitCode = {0x48, 0x83, 0xec, 0x08, 0x48, 0x8b, 0x05, 0x100, 0x100, 0x100, 0x100, 0x48,
                                       0x85, 0xc0, 0x74, 0x02, 0xff, 0xd0, 0x48, 0x83,  0xc4,  0x08,  0xc3};
const std::vector<int> kEndbr64 = {0xf3, 0x0f, 0x1e, 0xfa};

bool matches_code(const std::vector<uint8_t>& bytes, uint64_t offset, uint64_t size, const std::vector<int>& code) {
  if (size != code.size() || offset > bytes.size() || bytes.size() - offset < size) return false;
  for (size_t i = 0; i < code.size(); ++i) {
    if (code[i] != 0x100 && bytes[offset + i] != code[i]) return false;
  }
  return true;
}

std::string x86_init_anomaly(const ElfImage& img, const SectionInfo& init) {
  const Elf64_Shdr& h = init.header;
  if (matches_code(img.bytes(), h.sh_offset, h.sh_size, kX86InitCode)) return "";
  std::vector<int> with_endbr = kEndbr64;
  with_endbr.insert(with_endbr.end(), kX86InitCode.begin(), kX86InitCode.end());
  if (matches_code(img.bytes(), h.sh_offset, h.sh_size, with_endbr)) return "";
  return "the .init section (" + std::to_string(h.sh_size) + " bytes) holds code beyond the C runtime's _init";
}

using AddressToOffset = std::function<uint64_t(uint64_t, const char*)>;

// x86-64: the imported functions a function reaches through direct calls and
// jumps (e8/e9 rel32, into PLT stubs or into other functions of the object,
// followed) and calls through the GOT (ff 15 / ff 25 disp32). Bytes are
// scanned, not decoded, so only exact hits count: a rel32 must land on a PLT
// stub or on the first byte of a named function, a disp32 on an import's GOT
// slot. Calls through other function pointers are not followed: this finds
// what compiled code does, not what determined code hides (the loading
// filter stays the guarantee).
struct CallGraph {
  const ElfImage* img;
  const AddressToOffset* to_offset;
  const std::map<uint64_t, uint64_t>* function_sizes;
  std::map<uint64_t, std::string> plt_stub;  // stub address -> imported name
  std::map<uint64_t, std::string> got_slot;  // GOT slot address -> imported name

  std::vector<std::string> imports_reached_from(uint64_t start) const {
    std::set<std::string> reached;
    std::set<uint64_t> seen = {start};
    std::vector<uint64_t> todo = {start};
    const auto& b = img->bytes();
    while (!todo.empty() && seen.size() < 4096) {
      const uint64_t fn = todo.back();
      todo.pop_back();
      auto extent = function_sizes->find(fn);
      if (extent == function_sizes->end()) continue;
      uint64_t off = 0;
      try {
        off = (*to_offset)(fn, "function");
      } catch (const InputError&) {
        continue;
      }
      const uint64_t end = std::min<uint64_t>(b.size(), off + extent->second);
      for (uint64_t i = off; i + 5 <= end; ++i) {
        const uint64_t ip = fn + (i - off);
        if (b[i] == 0xe8 || b[i] == 0xe9) {
          int32_t rel = 0;
          std::memcpy(&rel, b.data() + i + 1, 4);
          const uint64_t target = ip + 5 + static_cast<int64_t>(rel);
          if (auto stub = plt_stub.find(target); stub != plt_stub.end()) {
            reached.insert(stub->second);
          } else if (function_sizes->count(target) && seen.insert(target).second) {
            todo.push_back(target);
          }
        } else if (b[i] == 0xff && i + 6 <= end && (b[i + 1] == 0x15 || b[i + 1] == 0x25)) {
          int32_t disp = 0;
          std::memcpy(&disp, b.data() + i + 2, 4);
          if (auto slot = got_slot.find(ip + 6 + static_cast<int64_t>(disp)); slot != got_slot.end()) {
            reached.insert(slot->second);
          }
        }
      }
    }
    return std::vector<std::string>(reached.begin(), reached.end());
  }
};

// PLT stubs (.plt, and .plt.sec where CET splits them) jump through a GOT
// slot: `ff 25 disp32` at the start of a 16-byte stub, or after endbr64 and a
// bnd prefix. The slot's relocation names the import.
void read_plt_stubs(const ElfImage& img, const std::vector<SectionInfo>& sections, CallGraph* graph) {
  const auto& b = img.bytes();
  for (const auto& sec : sections) {
    if (sec.name != ".plt" && sec.name != ".plt.sec") continue;
    const Elf64_Shdr& h = sec.header;
    if (h.sh_offset > b.size() || h.sh_size > b.size() - h.sh_offset) continue;
    for (uint64_t i = 0; i + 6 <= h.sh_size; ++i) {
      if (b[h.sh_offset + i] != 0xff || b[h.sh_offset + i + 1] != 0x25) continue;
      int32_t disp = 0;
      std::memcpy(&disp, b.data() + h.sh_offset + i + 2, 4);
      const uint64_t slot = h.sh_addr + i + 6 + static_cast<int64_t>(disp);
      if (auto name = graph->got_slot.find(slot); name != graph->got_slot.end()) {
        graph->plt_stub[h.sh_addr + (i & ~uint64_t{15})] = name->second;
      }
    }
  }
}

void read_load_time_code(const ElfImage& img, const Elf64_Ehdr& eh, const LoadTags& tags, const DynamicSymbols& dynsym,
                         const AddressToOffset& to_offset, const std::vector<SectionInfo>& sections,
                         const FunctionNames& names, ElfFacts* facts) {
  const RelocTypes types = reloc_types(eh.e_machine);
  CallGraph graph{&img, &to_offset, &names.size_at, {}, {}};
  auto describe = [&](ElfLoadTimeCode code) {
    auto [first, last] = names.at.equal_range(code.address);
    for (auto it = first; it != last; ++it) {
      code.names.push_back(it->second);
      code.name_counts.push_back(names.count.at(it->second));
    }
    if (eh.e_machine == EM_X86_64 && code.address != 0) code.reaches = graph.imports_reached_from(code.address);
    facts->load_time_code.push_back(std::move(code));
  };
  auto dynamic_symbol = [&](uint64_t index) {
    if (index >= dynsym.count) throw InputError("relocation names a symbol out of range");
    return img.read<Elf64_Sym>(dynsym.offset + index * sizeof(Elf64_Sym), "dynamic symbol");
  };

  // Arrays of function pointers the loader calls: DT_INIT_ARRAY, and the
  // legacy .ctors (0 and -1 are its terminators). The slots usually hold 0 in
  // the file and are filled by relocations; a slot without one holds its
  // final value (also the case for packed DT_RELR relocations).
  struct Slots {
    const char* kind;
    uint64_t address, size;
  };
  std::vector<Slots> arrays;
  if (tags.has_init_array) arrays.push_back({"init_array", tags.init_array, tags.init_array_size});
  for (const auto& sec : sections) {
    if (sec.name == ".ctors" && sec.header.sh_size > 0) {
      arrays.push_back({"ctors", sec.header.sh_addr, sec.header.sh_size});
    }
    if (sec.name == ".preinit_array" || sec.header.sh_type == SHT_PREINIT_ARRAY) {
      facts->load_hazards.push_back("a .preinit_array section");
    }
  }
  std::map<uint64_t, ElfLoadTimeCode> slot_code;  // by slot address
  for (const auto& a : arrays) {
    if (a.size % 8 != 0 || a.size > img.bytes().size()) {
      throw InputError(std::string(a.kind) + " size " + std::to_string(a.size) + " is not plausible");
    }
    for (uint64_t slot = a.address; slot < a.address + a.size; slot += 8) {
      ElfLoadTimeCode code;
      code.kind = a.kind;
      code.address = img.read<uint64_t>(to_offset(slot, a.kind), a.kind);
      slot_code[slot] = code;
    }
  }

  if (tags.rela_ent != sizeof(Elf64_Rela)) throw InputError("unexpected relocation entry size");
  std::vector<std::pair<uint64_t, uint64_t>> tables;  // (address, bytes)
  if (tags.rela != 0 && tags.rela_size > 0) tables.emplace_back(tags.rela, tags.rela_size);
  if (tags.jmprel != 0 && tags.pltrel_size > 0 && tags.pltrel == DT_RELA) {
    tables.emplace_back(tags.jmprel, tags.pltrel_size);
  }
  std::vector<uint64_t> ifunc_addresses;
  for (const auto& [address, bytes] : tables) {
    uint64_t base = to_offset(address, "relocation table");
    for (uint64_t off = 0; off + sizeof(Elf64_Rela) <= bytes; off += sizeof(Elf64_Rela)) {
      auto r = img.read<Elf64_Rela>(base + off, "relocation");
      uint32_t type = static_cast<uint32_t>(ELF64_R_TYPE(r.r_info));
      if (type == types.irelative) {
        ifunc_addresses.push_back(static_cast<uint64_t>(r.r_addend));
        continue;
      }
      // Imports' GOT slots, for the call graph. Only indices the symbol count
      // covers (with DT_GNU_HASH it is derived, see read_elf_facts).
      if ((type == types.glob_dat || type == types.jump_slot) && ELF64_R_SYM(r.r_info) != 0 &&
          ELF64_R_SYM(r.r_info) < dynsym.count) {
        Elf64_Sym sym = dynamic_symbol(ELF64_R_SYM(r.r_info));
        if (sym.st_shndx == SHN_UNDEF) {
          graph.got_slot[r.r_offset] = img.string_at(dynsym.strings, dynsym.strings_size, sym.st_name);
        }
      }
      auto slot = slot_code.find(r.r_offset);
      if (slot == slot_code.end()) continue;
      if (type == types.relative) {
        slot->second.address = static_cast<uint64_t>(r.r_addend);
      } else if ((type == types.abs64 || type == types.glob_dat || type == types.jump_slot) &&
                 ELF64_R_SYM(r.r_info) == 0) {
        slot->second.address = static_cast<uint64_t>(r.r_addend);  // no symbol: an absolute address
      } else if (type == types.abs64 || type == types.glob_dat || type == types.jump_slot) {
        Elf64_Sym sym = dynamic_symbol(ELF64_R_SYM(r.r_info));
        if (sym.st_shndx == SHN_UNDEF) {
          slot->second.address = 0;
          slot->second.imported = img.string_at(dynsym.strings, dynsym.strings_size, sym.st_name);
        } else {
          slot->second.address = sym.st_value + static_cast<uint64_t>(r.r_addend);
        }
      }
    }
  }
  if (eh.e_machine == EM_X86_64) read_plt_stubs(img, sections, &graph);
  for (auto& [slot, code] : slot_code) {
    if (code.kind == std::string("ctors") && (code.address == 0 || code.address == ~uint64_t{0})) continue;
    if (code.kind == std::string("init_array") && code.address == 0 && code.imported.empty()) continue;
    describe(code);
  }

  // IFUNC resolvers run while relocations are processed: exported ones and
  // local ones (IRELATIVE relocations).
  for (uint64_t i = 1; i < dynsym.count; ++i) {
    auto s = img.read<Elf64_Sym>(dynsym.offset + i * sizeof(Elf64_Sym), "dynamic symbol");
    if (s.st_shndx != SHN_UNDEF && ELF64_ST_TYPE(s.st_info) == STT_GNU_IFUNC) ifunc_addresses.push_back(s.st_value);
  }
  std::sort(ifunc_addresses.begin(), ifunc_addresses.end());
  ifunc_addresses.erase(std::unique(ifunc_addresses.begin(), ifunc_addresses.end()), ifunc_addresses.end());
  for (uint64_t address : ifunc_addresses) {
    ElfLoadTimeCode code;
    code.kind = "ifunc";
    code.address = address;
    describe(code);
  }

  if (tags.has_init) {
    ElfLoadTimeCode code;
    code.kind = "init";
    code.address = tags.init;
    auto init = std::find_if(sections.begin(), sections.end(), [](const SectionInfo& s) { return s.name == ".init"; });
    if (init != sections.end()) {
      if (init->header.sh_addr != tags.init) {
        code.anomaly = "DT_INIT points at " + hex(tags.init) + ", not at the .init section";
      } else if (eh.e_machine == EM_X86_64) {
        code.anomaly = x86_init_anomaly(img, *init);
      }
    }
    describe(code);
  }

  if (tags.textrel) facts->load_hazards.push_back("text relocations (DT_TEXTREL): the loader would write to code");
  for (const auto& h : tags.other_hazards) facts->load_hazards.push_back(h);
  for (const auto& [tag, offset] : tags.path_entries) {
    facts->load_hazards.push_back(tag + " " + img.string_at(dynsym.strings, dynsym.strings_size, offset) +
                                  ": makes the loader read other files");
  }
}

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

}  // namespace

ElfFacts read_elf_facts(const std::filesystem::path& path) {
  ElfImage img(read_file(path));
  const auto& b = img.bytes();
  if (b.size() < EI_NIDENT || std::memcmp(b.data(), ELFMAG, SELFMAG) != 0) throw InputError("not an ELF file");
  if (b[EI_CLASS] != ELFCLASS64) throw InputError("not a 64-bit ELF file");
  if (b[EI_DATA] != ELFDATA2LSB) throw InputError("not a little-endian ELF file");
  auto eh = img.read<Elf64_Ehdr>(0, "ELF header");
  if (eh.e_type != ET_DYN) throw InputError("not a shared object (e_type " + std::to_string(eh.e_type) + ")");
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) throw InputError("unexpected program header size");

  ElfFacts facts;
  facts.machine = eh.e_machine;

  // Program headers: W+X segments, executable bytes, the dynamic section.
  uint64_t dyn_offset = 0, dyn_size = 0;
  bool has_stack_header = false;
  std::vector<Elf64_Phdr> loads;
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    auto ph = img.read<Elf64_Phdr>(eh.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr), "program header");
    if (ph.p_type == PT_LOAD) {
      loads.push_back(ph);
      if ((ph.p_flags & PF_W) && (ph.p_flags & PF_X)) {
        facts.wx_segments.push_back("segment " + std::to_string(i) + " at " + hex(ph.p_vaddr) + " (" +
                                    ((ph.p_flags & PF_R) ? "R" : "") + "WX)");
      }
    } else if (ph.p_type == PT_DYNAMIC) {
      dyn_offset = ph.p_offset;
      dyn_size = ph.p_filesz;
    } else if (ph.p_type == PT_GNU_STACK) {
      has_stack_header = true;
      if (ph.p_flags & PF_X) facts.load_hazards.push_back("PT_GNU_STACK asks for an executable stack");
    }
  }
  // Without the header the loader assumes the object needs an executable stack.
  if (!has_stack_header) {
    facts.load_hazards.push_back("no PT_GNU_STACK header: the loader would make the stack executable");
  }
  if (dyn_size == 0) throw InputError("no dynamic section (a static executable, not a shared object)");

  // The dynamic section gives addresses; map them to file offsets via PT_LOAD.
  auto to_offset = [&](uint64_t vaddr, const char* what) -> uint64_t {
    for (const auto& ph : loads) {
      if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) return vaddr - ph.p_vaddr + ph.p_offset;
    }
    throw InputError(std::string("ELF ") + what + " address " + hex(vaddr) + " is outside every loadable segment");
  };

  uint64_t strtab = 0, strsz = 0, symtab = 0, syment = sizeof(Elf64_Sym), hash = 0, gnu_hash = 0;
  std::vector<uint64_t> needed_offsets;
  LoadTags tags;
  for (uint64_t off = dyn_offset; off + sizeof(Elf64_Dyn) <= dyn_offset + dyn_size; off += sizeof(Elf64_Dyn)) {
    auto d = img.read<Elf64_Dyn>(off, "dynamic entry");
    if (d.d_tag == DT_NULL) break;
    switch (d.d_tag) {
      case DT_STRTAB:
        strtab = d.d_un.d_ptr;
        break;
      case DT_STRSZ:
        strsz = d.d_un.d_val;
        break;
      case DT_SYMTAB:
        symtab = d.d_un.d_ptr;
        break;
      case DT_SYMENT:
        syment = d.d_un.d_val;
        break;
      case DT_HASH:
        hash = d.d_un.d_ptr;
        break;
      case DT_GNU_HASH:
        gnu_hash = d.d_un.d_ptr;
        break;
      case DT_NEEDED:
        needed_offsets.push_back(d.d_un.d_val);
        break;
      default:
        tags.record(d);
        break;
    }
  }
  if (strtab == 0 || symtab == 0) throw InputError("dynamic section has no symbol or string table");
  if (syment != sizeof(Elf64_Sym)) throw InputError("unexpected dynamic symbol size");
  uint64_t str_off = to_offset(strtab, "string table");
  uint64_t sym_off = to_offset(symtab, "symbol table");
  for (uint64_t n : needed_offsets) facts.needed.push_back(img.string_at(str_off, strsz, n));

  // The number of dynamic symbols is not stored directly: DT_HASH has it, and
  // with only DT_GNU_HASH it is one past the highest index in the chains.
  uint64_t nsyms = 0;
  if (hash != 0) {
    nsyms = img.read<uint32_t>(to_offset(hash, "hash table") + 4, "hash table");
  } else if (gnu_hash != 0) {
    uint64_t h = to_offset(gnu_hash, "GNU hash table");
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
  if (nsyms > (b.size() / sizeof(Elf64_Sym))) throw InputError("implausible dynamic symbol count");

  for (uint64_t i = 1; i < nsyms; ++i) {
    auto s = img.read<Elf64_Sym>(sym_off + i * sizeof(Elf64_Sym), "dynamic symbol");
    std::string name = img.string_at(str_off, strsz, s.st_name);
    if (name.empty()) continue;
    unsigned bind = ELF64_ST_BIND(s.st_info);
    if (s.st_shndx == SHN_UNDEF) {
      facts.undefined.push_back({name, bind == STB_WEAK});
    } else if (ELF64_ST_TYPE(s.st_info) == STT_FUNC && (bind == STB_GLOBAL || bind == STB_WEAK) &&
               ELF64_ST_VISIBILITY(s.st_other) == STV_DEFAULT) {
      facts.exported_functions.push_back(name);
    }
  }

  DynamicSymbols dynsym{sym_off, nsyms, str_off, strsz};
  const std::vector<SectionInfo> sections = read_sections(img, eh);
  const FunctionNames names = read_function_names(img, sections, dynsym, &facts.has_symbol_table);
  read_load_time_code(img, eh, tags, dynsym, to_offset, sections, names, &facts);
  std::map<uint64_t, std::string> functions;
  for (const auto& [address, name] : names.at) functions.emplace(address, name);
  facts.syscalls = scan_syscalls(b, eh.e_machine, code_regions(loads, sections), functions);
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

}  // namespace kforge::exec
