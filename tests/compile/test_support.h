// Helpers shared by the compile tests: scratch directories and a reader of
// ELF symbol tables (to check exports without loading candidate code).
#pragma once

#include <elf.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kforge/core/remove_tree.h"

namespace kforge::env::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("kforge-compile-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    kforge::remove_tree(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { kforge::remove_tree(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct ElfSymbol {
  std::string name;
  bool defined = false;
  bool global = false;
  bool function = false;
};

// Symbols of the first section of `section_type` (SHT_DYNSYM for what a
// shared object exports, SHT_SYMTAB for a CUBIN's kernels). Empty if the file
// is not a 64-bit little-endian ELF.
inline std::vector<ElfSymbol> elf_symbols(const std::filesystem::path& file, uint32_t section_type) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<ElfSymbol> out;
  if (bytes.size() < sizeof(Elf64_Ehdr) || bytes.compare(0, 4, ELFMAG) != 0 || bytes[EI_CLASS] != ELFCLASS64) {
    return out;
  }
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(bytes.data());
  if (eh->e_shoff + static_cast<size_t>(eh->e_shnum) * sizeof(Elf64_Shdr) > bytes.size()) return out;
  const auto* sections = reinterpret_cast<const Elf64_Shdr*>(bytes.data() + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    const Elf64_Shdr& sh = sections[i];
    if (sh.sh_type != section_type || sh.sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr& strtab = sections[sh.sh_link];
    if (sh.sh_offset + sh.sh_size > bytes.size() || strtab.sh_offset + strtab.sh_size > bytes.size()) return out;
    const auto* syms = reinterpret_cast<const Elf64_Sym*>(bytes.data() + sh.sh_offset);
    for (size_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym); ++k) {
      if (syms[k].st_name >= strtab.sh_size) continue;
      ElfSymbol s;
      s.name = std::string(bytes.data() + strtab.sh_offset + syms[k].st_name);
      s.defined = syms[k].st_shndx != SHN_UNDEF;
      s.global = ELF64_ST_BIND(syms[k].st_info) == STB_GLOBAL;
      s.function = ELF64_ST_TYPE(syms[k].st_info) == STT_FUNC;
      out.push_back(s);
    }
    break;
  }
  return out;
}

inline bool exports_function(const std::filesystem::path& so, const std::string& name) {
  for (const auto& s : elf_symbols(so, SHT_DYNSYM)) {
    if (s.name == name && s.defined && s.global && s.function) return true;
  }
  return false;
}

// DT_NEEDED entries of a shared object ("libcublas.so.13", ...).
inline std::vector<std::string> elf_needed(const std::filesystem::path& so) {
  std::ifstream in(so, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  if (bytes.size() < sizeof(Elf64_Ehdr) || bytes.compare(0, 4, ELFMAG) != 0) return out;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(bytes.data());
  const auto* sections = reinterpret_cast<const Elf64_Shdr*>(bytes.data() + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sections[i].sh_type != SHT_DYNAMIC) continue;
    const Elf64_Shdr& strtab = sections[sections[i].sh_link];
    const auto* dyn = reinterpret_cast<const Elf64_Dyn*>(bytes.data() + sections[i].sh_offset);
    for (size_t k = 0; k < sections[i].sh_size / sizeof(Elf64_Dyn); ++k) {
      if (dyn[k].d_tag == DT_NEEDED) out.emplace_back(bytes.data() + strtab.sh_offset + dyn[k].d_un.d_val);
    }
  }
  return out;
}

}  // namespace kforge::env::testing
