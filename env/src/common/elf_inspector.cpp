#include "common/elf_inspector.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
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

// Byte patterns of instructions that enter the kernel directly.
std::vector<std::vector<uint8_t>> syscall_patterns(uint16_t machine) {
  if (machine == EM_X86_64) return {{0x0f, 0x05}, {0x0f, 0x34}, {0xcd, 0x80}};
  if (machine == EM_AARCH64) return {{0x01, 0x00, 0x00, 0xd4}};  // svc #0, little-endian
  return {};
}

void scan_for_syscalls(const ElfImage& img, uint64_t offset, uint64_t size, uint16_t machine,
                       std::vector<uint64_t>* out) {
  const auto& b = img.bytes();
  if (offset >= b.size()) return;
  uint64_t end = std::min<uint64_t>(b.size(), offset + size);
  bool aligned_words = machine == EM_AARCH64;  // A64 instructions are 4-byte aligned
  for (const auto& pattern : syscall_patterns(machine)) {
    for (uint64_t i = offset; i + pattern.size() <= end; i += aligned_words ? 4 : 1) {
      if (std::equal(pattern.begin(), pattern.end(), b.begin() + static_cast<std::ptrdiff_t>(i))) out->push_back(i);
    }
  }
  std::sort(out->begin(), out->end());
}

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
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
  std::vector<Elf64_Phdr> loads;
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    auto ph = img.read<Elf64_Phdr>(eh.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr), "program header");
    if (ph.p_type == PT_LOAD) {
      loads.push_back(ph);
      if ((ph.p_flags & PF_W) && (ph.p_flags & PF_X)) {
        facts.wx_segments.push_back("segment " + std::to_string(i) + " at " + hex(ph.p_vaddr) + " (" +
                                    ((ph.p_flags & PF_R) ? "R" : "") + "WX)");
      }
      if (ph.p_flags & PF_X) scan_for_syscalls(img, ph.p_offset, ph.p_filesz, eh.e_machine, &facts.syscall_offsets);
    } else if (ph.p_type == PT_DYNAMIC) {
      dyn_offset = ph.p_offset;
      dyn_size = ph.p_filesz;
    }
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
  if (!f.syscall_offsets.empty()) {
    std::string where;
    for (size_t i = 0; i < f.syscall_offsets.size() && i < 4; ++i) where += (i ? ", " : "") + hex(f.syscall_offsets[i]);
    if (f.syscall_offsets.size() > 4) where += ", ...";
    r.violations.push_back({"raw_syscall", std::to_string(f.syscall_offsets.size()) +
                                               " system-call instruction(s) in executable code at file offset " +
                                               where + " (kernels must not enter the OS directly)"});
  }
  r.accepted = r.violations.empty();
  return r;
}

}  // namespace kforge::exec
