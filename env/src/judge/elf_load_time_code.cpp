#include <algorithm>
#include <map>
#include <set>

#include "judge/elf_image.h"

namespace kforge::judge::internal {
namespace {

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

Elf64_Sym dynamic_symbol(const ElfImage& img, const DynamicSymbols& dynsym, uint64_t index) {
  if (index >= dynsym.count) throw InputError("relocation names a symbol out of range");
  return img.read<Elf64_Sym>(dynsym.offset + index * sizeof(Elf64_Sym), "dynamic symbol");
}

// Arrays of function pointers the loader calls: DT_INIT_ARRAY, and the
// legacy .ctors (0 and -1 are its terminators). The slots usually hold 0 in
// the file and are filled by relocations; a slot without one holds its
// final value (also the case for packed DT_RELR relocations).
std::map<uint64_t, ElfLoadTimeCode> loader_called_slots(const ElfImage& img, const LoadTags& tags,
                                                        const AddressToOffset& to_offset,
                                                        const std::vector<SectionInfo>& sections, ElfFacts* facts) {
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
  return slot_code;
}

// What one relocation puts into a loader-called slot: an address, or an import.
void resolve_slot(const ElfImage& img, const DynamicSymbols& dynsym, const RelocTypes& types, const Elf64_Rela& r,
                  ElfLoadTimeCode* code) {
  const auto type = static_cast<uint32_t>(ELF64_R_TYPE(r.r_info));
  const bool symbolic = type == types.abs64 || type == types.glob_dat || type == types.jump_slot;
  if (type == types.relative || (symbolic && ELF64_R_SYM(r.r_info) == 0)) {
    code->address = static_cast<uint64_t>(r.r_addend);  // no symbol: an absolute address
  } else if (symbolic) {
    Elf64_Sym sym = dynamic_symbol(img, dynsym, ELF64_R_SYM(r.r_info));
    if (sym.st_shndx == SHN_UNDEF) {
      code->address = 0;
      code->imported = img.string_at(dynsym.strings, dynsym.strings_size, sym.st_name);
    } else {
      code->address = sym.st_value + static_cast<uint64_t>(r.r_addend);
    }
  }
}

// Walks the RELA tables: IRELATIVE targets (local IFUNC resolvers), the
// imports' GOT slots for the call graph, and the values of loader-called slots.
void apply_relocations(const ElfImage& img, const LoadTags& tags, const RelocTypes& types, const DynamicSymbols& dynsym,
                       const AddressToOffset& to_offset, CallGraph* graph,
                       std::map<uint64_t, ElfLoadTimeCode>* slot_code, std::vector<uint64_t>* ifunc_addresses) {
  if (tags.rela_ent != sizeof(Elf64_Rela)) throw InputError("unexpected relocation entry size");
  std::vector<std::pair<uint64_t, uint64_t>> tables;  // (address, bytes)
  if (tags.rela != 0 && tags.rela_size > 0) tables.emplace_back(tags.rela, tags.rela_size);
  if (tags.jmprel != 0 && tags.pltrel_size > 0 && tags.pltrel == DT_RELA) {
    tables.emplace_back(tags.jmprel, tags.pltrel_size);
  }
  for (const auto& [address, bytes] : tables) {
    uint64_t base = to_offset(address, "relocation table");
    for (uint64_t off = 0; off + sizeof(Elf64_Rela) <= bytes; off += sizeof(Elf64_Rela)) {
      auto r = img.read<Elf64_Rela>(base + off, "relocation");
      const auto type = static_cast<uint32_t>(ELF64_R_TYPE(r.r_info));
      if (type == types.irelative) {
        ifunc_addresses->push_back(static_cast<uint64_t>(r.r_addend));
        continue;
      }
      // Imports' GOT slots, for the call graph. Only indices the symbol count
      // covers (with DT_GNU_HASH it is derived, see read_elf_facts).
      if ((type == types.glob_dat || type == types.jump_slot) && ELF64_R_SYM(r.r_info) != 0 &&
          ELF64_R_SYM(r.r_info) < dynsym.count) {
        Elf64_Sym sym = dynamic_symbol(img, dynsym, ELF64_R_SYM(r.r_info));
        if (sym.st_shndx == SHN_UNDEF) {
          graph->got_slot[r.r_offset] = img.string_at(dynsym.strings, dynsym.strings_size, sym.st_name);
        }
      }
      auto slot = slot_code->find(r.r_offset);
      if (slot != slot_code->end()) resolve_slot(img, dynsym, types, r, &slot->second);
    }
  }
}

// IFUNC resolvers run while relocations are processed: exported ones here,
// local ones (IRELATIVE relocations) found by apply_relocations. Sorted, once each.
void add_exported_ifuncs(const ElfImage& img, const DynamicSymbols& dynsym, std::vector<uint64_t>* ifunc_addresses) {
  for (uint64_t i = 1; i < dynsym.count; ++i) {
    auto s = img.read<Elf64_Sym>(dynsym.offset + i * sizeof(Elf64_Sym), "dynamic symbol");
    if (s.st_shndx != SHN_UNDEF && ELF64_ST_TYPE(s.st_info) == STT_GNU_IFUNC) ifunc_addresses->push_back(s.st_value);
  }
  std::sort(ifunc_addresses->begin(), ifunc_addresses->end());
  ifunc_addresses->erase(std::unique(ifunc_addresses->begin(), ifunc_addresses->end()), ifunc_addresses->end());
}

// DT_INIT, and whether it points where the .init section is and looks like one.
ElfLoadTimeCode init_function(const ElfImage& img, const Elf64_Ehdr& eh, const LoadTags& tags,
                              const std::vector<SectionInfo>& sections) {
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
  return code;
}

// What makes the loader write to code or read other files.
void add_load_hazards(const ElfImage& img, const LoadTags& tags, const DynamicSymbols& dynsym, ElfFacts* facts) {
  if (tags.textrel) facts->load_hazards.push_back("text relocations (DT_TEXTREL): the loader would write to code");
  for (const auto& h : tags.other_hazards) facts->load_hazards.push_back(h);
  for (const auto& [tag, offset] : tags.path_entries) {
    facts->load_hazards.push_back(tag + " " + img.string_at(dynsym.strings, dynsym.strings_size, offset) +
                                  ": makes the loader read other files");
  }
}

}  // namespace

void read_load_time_code(const ElfImage& img, const Elf64_Ehdr& eh, const LoadTags& tags, const DynamicSymbols& dynsym,
                         const AddressToOffset& to_offset, const std::vector<SectionInfo>& sections,
                         const FunctionNames& names, ElfFacts* facts) {
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

  std::map<uint64_t, ElfLoadTimeCode> slot_code = loader_called_slots(img, tags, to_offset, sections, facts);
  std::vector<uint64_t> ifunc_addresses;
  apply_relocations(img, tags, reloc_types(eh.e_machine), dynsym, to_offset, &graph, &slot_code, &ifunc_addresses);
  if (eh.e_machine == EM_X86_64) read_plt_stubs(img, sections, &graph);
  for (auto& [slot, code] : slot_code) {
    if (code.kind == std::string("ctors") && (code.address == 0 || code.address == ~uint64_t{0})) continue;
    if (code.kind == std::string("init_array") && code.address == 0 && code.imported.empty()) continue;
    describe(code);
  }
  add_exported_ifuncs(img, dynsym, &ifunc_addresses);
  for (uint64_t address : ifunc_addresses) {
    ElfLoadTimeCode code;
    code.kind = "ifunc";
    code.address = address;
    describe(code);
  }
  if (tags.has_init) describe(init_function(img, eh, tags, sections));
  add_load_hazards(img, tags, dynsym, facts);
}

}  // namespace kforge::judge::internal
