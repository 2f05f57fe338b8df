#include "judge/elf_image.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

namespace kforge::judge::internal {

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

void LoadTags::record(const Elf64_Dyn& d) {
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

void FunctionNames::add(const Elf64_Sym& s, const std::string& name) {
  unsigned type = ELF64_ST_TYPE(s.st_info);
  if (name.empty() || s.st_shndx == SHN_UNDEF || s.st_shndx == SHN_ABS) return;
  if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE) return;
  at.emplace(s.st_value, name);
  ++count[name];
  if (type == STT_FUNC && s.st_size > 0) size_at[s.st_value] = std::max(size_at[s.st_value], s.st_size);
}

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

}  // namespace kforge::judge::internal
