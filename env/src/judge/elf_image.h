// The reading half of ELF inspection (elf_inspector.h): a bounds-checked view
// of the file and the tables read from it (dynamic tags, sections, function
// names), and the load-time code those tables lead to
// (elf_load_time_code.cpp). Internal to elf_inspector.cpp and its parts.
#pragma once

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "judge/elf_inspector.h"
#include "kforge/core/error.h"

namespace kforge::judge::internal {

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

// The whole file; InputError if it cannot be opened.
std::vector<uint8_t> read_file(const std::filesystem::path& path);

// "0x1f40".
std::string hex(uint64_t v);

// Dynamic-section entries that decide what runs, or from where, at load time.
struct LoadTags {
  uint64_t init = 0, init_array = 0, init_array_size = 0, preinit_array = 0;
  uint64_t rela = 0, rela_size = 0, rela_ent = sizeof(Elf64_Rela), jmprel = 0, pltrel_size = 0;
  uint64_t pltrel = DT_RELA;
  bool has_init = false, has_init_array = false, textrel = false;
  // (tag name, string-table offset) of entries that name other files.
  std::vector<std::pair<std::string, uint64_t>> path_entries;
  std::vector<std::string> other_hazards;

  void record(const Elf64_Dyn& d);
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
std::vector<SectionInfo> read_sections(const ElfImage& img, const Elf64_Ehdr& eh);

// Function names by address: from .symtab when present (it names local
// functions such as frame_dummy), else from .dynsym.
struct FunctionNames {
  std::multimap<uint64_t, std::string> at;
  std::map<std::string, int> count;
  std::map<uint64_t, uint64_t> size_at;  // functions' extents, for the load-time call graph

  void add(const Elf64_Sym& s, const std::string& name);
};

FunctionNames read_function_names(const ElfImage& img, const std::vector<SectionInfo>& sections,
                                  const DynamicSymbols& dynsym, bool* from_symtab);

// A virtual address as a file offset; throws InputError naming `what` when
// no loaded segment holds it.
using AddressToOffset = std::function<uint64_t(uint64_t, const char*)>;

// Everything that runs while the object loads (constructors, .ctors, IFUNC
// resolvers, DT_INIT) and what it reaches, into facts->load_time_code; the
// loader's other hazards into facts->load_hazards.
void read_load_time_code(const ElfImage& img, const Elf64_Ehdr& eh, const LoadTags& tags, const DynamicSymbols& dynsym,
                         const AddressToOffset& to_offset, const std::vector<SectionInfo>& sections,
                         const FunctionNames& names, ElfFacts* facts);

}  // namespace kforge::judge::internal
